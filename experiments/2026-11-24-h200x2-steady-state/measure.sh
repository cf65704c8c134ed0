#!/usr/bin/env bash
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# Evaluations per minute of the steady-state search (`evo evolve --steady`) on 1 and on
# 2 GPUs of one host: same seed, same budget, same in-flight count, no CUBIN cache (every
# variant is compiled, as in a new search), alternating order (1 then 2 GPUs, then 2 then
# 1), two repeats each, after one warm-up search that is not counted.
#
#   OUT=DIR bash measure.sh seed      # the seed shape, budget 300       (about 4 minutes)
#   OUT=DIR bash measure.sh large     # B2 H16 L4096 D128 f16, budget 60 (about 4 minutes)
#   OUT=DIR bash measure.sh summary   # the table of every run under DIR so far
#
# Run from the repository root; the binary is $EVO (default target/release/evo), the
# seeds $GENOMES (default genomes). Each phase ends with the summary of all runs so far.
set -u
EVO=${EVO:-target/release/evo}
OUT=${OUT:-measure-out}
phase=${1:-}
mkdir -p "$OUT/runs"
results=$OUT/results.txt
seed=11

# The 2-GPU evaluator's own in-flight count (3 per GPU, and one per compile thread's
# share of a candidate's variants; the compile threads are the cores but one per GPU),
# given to both configurations so that they run the same search.
threads=$(($(nproc) - 2))
in_flight_seed=$((6 + (threads + 1) / 2)) # 2 variants: D64 f16, D128 bf16
in_flight_large=$((6 + (threads + 2) / 3)) # 3 variants: and the objective's D128 f16

large_problem=2,16,4096,4096,128,f16

# run LABEL SHAPE GPUS BUDGET IN_FLIGHT [evolve options...]
run() {
  local label=$1 shape=$2 gpus=$3 budget=$4 in_flight=$5
  shift 5
  local exp=$OUT/runs/$label log=$OUT/$label.txt
  rm -rf "$exp"
  local s e rc
  s=$(date +%s.%N)
  timeout 300 "$EVO" evolve --steady --in-flight "$in_flight" --budget "$budget" --seed "$seed" \
    --experiment "$exp" --genomes "${GENOMES:-genomes}" --cubin-cache off --quiet --gpus "$gpus" "$@" \
    >"$log" 2>&1
  rc=$?
  e=$(date +%s.%N)
  echo "== $label ($shape, --gpus $gpus, rc $rc)"
  grep -E '^(evaluating on|[0-9]+ evaluations:|champion:|  GPU [0-9]+: |  compiles: )' "$log"
  echo "evaluations per GPU (device_index):" \
    "$(grep -o '"device_index":[0-9]*' "$exp/evaluations.jsonl" 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
  [ "$label" = "${label#warmup}" ] || return 0
  awk -v l="$label" -v sh="$shape" -v g="$gpus" -v b="$budget" -v s="$s" -v e="$e" -v rc="$rc" \
    'BEGIN { w = e - s; n = split(g, x, ","); printf "RESULT %s shape=%s gpus=%d budget=%d rc=%s wall_s=%.1f evals_per_min=%.1f\n", l, sh, n, b, rc, w, b / w * 60 }' |
    tee -a "$results"
}

summary() {
  echo
  echo "| run (in order) | shape | GPUs | rc | wall s | evaluations / min |"
  echo "|---|---|---:|---:|---:|---:|"
  awk '/^RESULT/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
       printf "| %s | %s | %s | %s | %s | %s |\n", $2, v["shape"], v["gpus"], v["rc"], v["wall_s"], v["evals_per_min"] }' "$results"
  echo
  echo "| shape | 1 GPU, evaluations / min (mean) | 2 GPUs, evaluations / min (mean) | 2 GPUs / 1 GPU |"
  echo "|---|---:|---:|---:|"
  awk '/^RESULT/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
       k = v["shape"] SUBSEP v["gpus"]; sum[k] += v["evals_per_min"]; n[k]++; shapes[v["shape"]] = 1 }
       END { for (s in shapes) { a = n[s, 1] ? sum[s, 1] / n[s, 1] : 0; b = n[s, 2] ? sum[s, 2] / n[s, 2] : 0
             printf "| %s | %.1f (%d runs) | %.1f (%d runs) | %s |\n", s, a, n[s, 1], b, n[s, 2], (a > 0 ? sprintf("%.2fx", b / a) : "-") } }' "$results"
}

case "$phase" in
seed | large)
  { date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; echo "cores: $(nproc)"; } 2>&1 |
    tee -a "$OUT/host.txt"
  if [ "$phase" = seed ]; then
    budget=300 in_flight=$in_flight_seed extra=()
  else
    budget=60 in_flight=$in_flight_large extra=(--problem "$large_problem")
  fi
  echo "$phase: budget $budget, $in_flight in flight, seed $seed"
  run "warmup-$phase" "$phase" 0,1 16 "$in_flight" "${extra[@]}"
  run "$phase-gpus0-a" "$phase" 0 "$budget" "$in_flight" "${extra[@]}"
  run "$phase-gpus01-a" "$phase" 0,1 "$budget" "$in_flight" "${extra[@]}"
  run "$phase-gpus01-b" "$phase" 0,1 "$budget" "$in_flight" "${extra[@]}"
  run "$phase-gpus0-b" "$phase" 0 "$budget" "$in_flight" "${extra[@]}"
  tar -czf "$OUT/runs-$phase.tgz" -C "$OUT/runs" . && rm -rf "$OUT/runs"
  summary
  ;;
summary) summary ;;
*)
  echo "usage: OUT=DIR bash measure.sh seed|large|summary" >&2
  exit 2
  ;;
esac
