#!/usr/bin/env bash
# Evaluations per minute of `evo evolve` with 1 and with 2 GPUs: same seed, same budget.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
E=${EVO:-target/release/evo}
log=$OUT/log.txt
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nproc; } 2>&1 | tee "$log"
run() {
  label=$1; shift
  exp=$OUT/runs/$label
  s=$(date +%s.%N)
  "$E" evolve --budget 120 --seed 7 --experiment "$exp" --genomes "${GENOMES:-genomes}" --quiet "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  e=$(date +%s.%N)
  awk -v l="$label" -v s="$s" -v e="$e" -v rc="$rc" -v args="$*" \
    'BEGIN { w = e - s; printf "RESULT %s args=[%s] rc=%s wall_s=%.1f evals_per_min=%.1f\n", l, args, rc, w, 120 / w * 60 }' | tee -a "$log"
}
run gpus0-a --gpus 0
run gpus01-a --gpus 0,1
run gpus0-b --gpus 0
run gpus01-b --gpus 0,1
run default
tar -czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$OUT/runs"
