#!/usr/bin/env bash
# `just slurm-test`: a one-node Slurm cluster on this machine, and the island-model
# batch scripts submitted to it as a user would, on the replay backend.
#
#   scripts/slurm/local-test.sh RUN_DIR
#
# Needs root and Debian (or Ubuntu): installs slurm-wlm and munge with apt-get, writes
# /etc/slurm/slurm.conf for this host (refusing to replace one it did not write),
# starts munged, slurmctld and slurmd, builds evo, submits 3 islands with
# scripts/slurm/submit.sh --no-gpu (a GPU gres cannot be configured on a machine
# without a GPU, so --gpus-per-task is dropped and the islands replay the recorded
# landscape), waits for the merge job, and checks the merged experiment.
# Meant for a throwaway machine or container: the daemons are left running.
set -euo pipefail

run=${1:?usage: local-test.sh RUN_DIR}
marker="# written by evo's scripts/slurm/local-test.sh"
if [ "$(id -u)" != 0 ]; then
  echo "local-test.sh: needs root (it installs and starts Slurm); run it in a throwaway container" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "local-test.sh: needs apt-get (Debian or Ubuntu) to install slurm-wlm and munge" >&2
  exit 1
fi
if [ -f /etc/slurm/slurm.conf ] && ! grep -qF "$marker" /etc/slurm/slurm.conf; then
  echo "local-test.sh: /etc/slurm/slurm.conf exists and was not written by this script; not touching a real cluster's config" >&2
  exit 1
fi

step() { echo "== $*"; }

step "install slurm-wlm and munge"
if ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
slurmd -V

step "munge"
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
    || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -u munge -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged
fi
munge -n | unmunge | grep STATUS

step "slurm.conf for $(hostname -s)"
host=$(hostname -s)
cpus=$(nproc)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > /etc/slurm/slurm.conf <<CONF
$marker
ClusterName=evo-test
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
cat /etc/slurm/slurm.conf

step "slurmctld and slurmd"
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 60); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1 || true)
  case "$state" in
    idle | mix | alloc) break ;;
    down* | drain*) scontrol update nodename="$host" state=resume || true ;;
  esac
  sleep 1
done
sinfo
case "$state" in
  idle | mix | alloc) ;;
  *)
    echo "local-test.sh: the node never came up (state: ${state:-none}); the daemons' logs:" >&2
    tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
    exit 1
    ;;
esac

step "build evo"
cargo build --quiet
export EVO=target/debug/evo

step "submit 3 islands and the merge"
rm -rf "$run"
submitted=$(scripts/slurm/submit.sh --islands 3 --run "$run" --cpus 1 --no-gpu -- \
  --backend replay:experiments/2026-11-22-h100-landscape --budget 120 --population 12)
echo "$submitted"
merge=$(echo "$submitted" | sed -n 's/^merge: *job \([0-9]*\).*/\1/p')
squeue

step "wait for the merge job $merge"
for _ in $(seq 600); do
  state=$(scontrol show job "$merge" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$state" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;;
  esac
  sleep 1
done
echo "merge job $merge: $state"
for f in "$run"/slurm/*.out; do
  echo "-- $f"
  cat "$f"
done
if [ "$state" != COMPLETED ]; then
  echo "local-test.sh: the merge job ended $state" >&2
  exit 1
fi

step "check the merged experiment"
"$EVO" lineage "$run/merged"
python3 - "$run/merged/lineage.json" <<'PY'
import json, sys
lineage = json.load(open(sys.argv[1]))
nodes = {n["id"]: n for n in lineage["nodes"]}
islands = sorted({n["island"] for n in nodes.values()})
print(f"merged lineage: {len(nodes)} nodes from islands {islands}")
assert islands == [0, 1, 2], f"expected nodes of islands 0, 1, 2, got {islands}"
assert not any(n["operators"][0]["op"] == "immigrant" for n in nodes.values()), "an immigrant node was left in"
PY
if ! grep -Eq ' [1-9][0-9]* migration edges' "$run/slurm/merge.out"; then
  echo "local-test.sh: the merge found no migration edge: the islands did not trade" >&2
  exit 1
fi
echo "slurm-test: passed"
