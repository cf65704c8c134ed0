#!/bin/bash
# Runs L1, L2: GREEN on the device with the forward's log-sum-exp checked (kernels/ABI.md,
# "The log-sum-exp output"): fa2 (Ampere template), fa3 (Hopper, staged O) and two
# per-shape champions (split 8 + combine + packed heads; splits merged in a cluster),
# then a hand-written kernel without evo_lse (no lse launch), then the GPU tests' GREEN
# snapshots of the seed and per-shape champions (every champion's GREEN, its lse checked
# on every case; the snapshots must not move: nothing else computed changed).
# Needs target/record/lse/{evo,evo_gates_gpu}.xz: `cargo build --release` and
# `cargo test -p evo-gates --features gpu --release --no-run` at the commit that adds this
# script, each binary compressed with python3's lzma.
# Usage (repository root): bash experiments/2026-11-26-h100-forward-lse/run.sh l2
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/${1:?run name, e.g. l2}; mkdir -p $R target/release
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/lse/$1.xz $2 && chmod +x $2; }
unxz evo target/release/evo; unxz evo_gates_gpu target/record/lse/evo_gates_gpu
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc" >> $R/$name.txt; echo "$name: exit $rc"
}
C=genomes/champions/h100
step gate 110 target/release/evo gate genomes/fa2.toml genomes/fa3.toml \
  $C/b16-h32kv1-lq1-lk8192-d128-causal-br.toml $C/b1-h8-l512-d64-causal.toml \
  --time none --seed 2026 --json $R/gate.json
grep -E "^(PASS|FAIL)|passed GREEN|GREEN (pass|FAIL)" $R/gate.txt | tail -8
python3 - $R/gate.json > $R/lse-summary.txt <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
by = {}
for r in rows:
    k = by.setdefault(r["kernel"], [0, 0, 0.0, 0])
    k[0] += 1; k[1] += r["verdict"] == "pass"
    if r.get("lse_max_err") is not None:
        k[3] += 1; k[2] = max(k[2], r["lse_max_err"])
for name, (n, ok, err, with_lse) in by.items():
    print(f"{name}: {ok}/{n} cases pass, lse checked on {with_lse}, worst lse error {err:.2e}")
PY
cat $R/lse-summary.txt
step no-lse 30 target/release/evo gate --source tests/kernels/naive.cu --time none --seed 2026 --json $R/no-lse.json
tail -3 $R/no-lse.txt
export EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=no
step snapshots 85 target/record/lse/evo_gates_gpu --test-threads=1 green_report_snapshot
tail -5 $R/snapshots.txt
