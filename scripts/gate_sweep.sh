#!/usr/bin/env bash
# Gates a long list of kernels and carries on past a hung one.
#
#   scripts/gate_sweep.sh RESULTS_DIR MAX_RESTARTS EVO_GATE_ARGS...
#
# `evo gate` ends with status 3 when one step of a kernel hangs (a hung kernel cannot be
# stopped inside its process; the report names the kernel and the case). This script
# keeps that record and runs the same gate again with `--from` the next kernel, at most
# MAX_RESTARTS times. Each segment's JSON is RESULTS_DIR/part-<K>.json, the whole log
# RESULTS_DIR/output.txt; the last line summarises passes, failures and hangs.
#
# Needs: EVO (the evo binary, default target/release/evo).
set -uo pipefail
results=${1:?results dir}
restarts=${2:?max restarts}
shift 2
evo=${EVO:-target/release/evo}
mkdir -p "$results"
log=$results/output.txt
from=1
for ((attempt = 0; attempt <= restarts; attempt++)); do
  echo "== $evo gate $* --from $from --json $results/part-$from.json" | tee -a "$log"
  "$evo" gate "$@" --from "$from" --json "$results/part-$from.json" >>"$log" 2>&1
  rc=$?
  echo "exit $rc" | tee -a "$log"
  [ "$rc" -eq 3 ] || break
  # "[k/n] name: TIMEOUT: ..." names the hung kernel; go on after it.
  k=$(grep -oE '^\[[0-9]+/[0-9]+\] [^ ]+: TIMEOUT' "$log" | tail -1 | sed -E 's/^\[([0-9]+)\/([0-9]+)\].*/\1 \2/')
  read -r hung total <<<"$k"
  [ -n "${hung:-}" ] && [ "$hung" -lt "$total" ] || break
  from=$((hung + 1))
done
pass=$(grep -E '^\[[0-9]+/[0-9]+\] .*: GREEN pass' "$log" | grep -vc 'FAST FAIL')
fail=$(grep -cE '^\[[0-9]+/[0-9]+\] .*: (GREEN FAIL|compile failed|GREEN pass.*FAST FAIL)' "$log")
hung=$(grep -cE '^\[[0-9]+/[0-9]+\] .*: TIMEOUT' "$log")
echo "sweep: $pass passed GREEN, $fail failed, $hung hung (see $log)" | tee -a "$log"
