#!/usr/bin/env bash
# The GPU records of the hardened gates, in one script (one GPU session of under ten
# minutes): each phase writes its raw output into $RESULTS/<phase>/.
#
#   scripts/gate_integrity_evidence.sh RESULTS_DIR [PHASE...]   (default: all, in order)
#
# Phases:
#   info        nvidia-smi, driver, CUDA
#   adversarial evo gate on tests/kernels/*.cu with a fresh seed (GREEN with drawn shapes,
#               then the verified FAST on the seed shape), each verdict checked against its
#               .expected.toml
#   gputest     the GPU test set's adversarial, naive and hybrid tests (GATES_GPU_TESTS)
#   evolve      a 200-evaluation GPU search on the seed shape with the hardened gates:
#               evaluations per minute, and the champion's report naming its gates
#   sweep       evo gate over the named genomes, the per-shape champions and 300 sampled
#               genomes with a fresh seed: GREEN (12 fixed + 6 drawn shapes, large cases on
#               every row) and the verified FAST on the seed shape
#   sanitize    compute-sanitizer memcheck, racecheck, synccheck (the `just sanitize` commands)
#
# Needs: EVO (default target/release/evo) and, for gputest, GATES_GPU_TESTS (the binary
# of `cargo test -p evo-gates --features gpu --release --no-run`).
set -uo pipefail
results=${1:?results dir}
shift
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(info adversarial evolve sweep sanitize)
evo=${EVO:-target/release/evo}
mkdir -p "$results"

run() { # name, command...: time it, keep stdout+stderr, never stop the script
  local name=$1
  shift
  mkdir -p "$results/$name"
  echo "== $name: $*" | tee -a "$results/$name/command.txt"
  local start=$SECONDS
  "$@" >>"$results/$name/output.txt" 2>&1
  local rc=$?
  echo "exit $rc after $((SECONDS - start)) s" | tee -a "$results/$name/command.txt"
  tail -n 15 "$results/$name/output.txt"
}

for phase in "${phases[@]}"; do
  case $phase in
  info)
    mkdir -p "$results/info"
    {
      date -u +%FT%TZ
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
      ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
      "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" --version 2>&1 | tail -2
    } >"$results/info/info.txt" 2>&1
    cat "$results/info/info.txt"
    ;;
  adversarial)
    srcs=()
    # The forward's kernels only: the backward ones (bwd_*.cu) go through the backward
    # gate in a run of their own (experiments/2026-11-26-h100-bwd-gate/run-g4.sh).
    for f in tests/kernels/*.cu; do
        [[ $(basename "$f") == bwd_* ]] && continue
        srcs+=(--source "$f")
    done
    # No --seed: a fresh one, as `evo gate` draws it (fixed_draw_only.cu passes at 2026).
    run adversarial "$evo" gate "${srcs[@]}" --suite default --time seed \
      --json "$results/adversarial/adversarial.json"
    run adversarial python3 scripts/check_verdicts.py "$results/adversarial/adversarial.json"
    ;;
  gputest)
    run gputest env EVO_REPO="$PWD" "${GATES_GPU_TESTS:?GATES_GPU_TESTS}" --test-threads=1 \
      --nocapture hand_written_kernels the_naive_kernel cublas_hybrid
    ;;
  evolve)
    rm -rf "$results/evolve/experiment"
    run evolve "$evo" evolve --backend gpu --strategy evolutionary --budget 200 --seed 1 \
      --experiment "$results/evolve/experiment" --quiet
    ;;
  sweep)
    run sweep "$evo" gate genomes/*.toml $(ls genomes/champions/*/*.toml | grep -v dispatch.toml) \
      --sample 300 --suite default --time seed --json "$results/sweep/sweep.json"
    ;;
  sanitize)
    sanitizer="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
    gate=("$evo" gate genomes/*.toml --sample 24 --seed 7 --suite tests/sanitize/suite.toml
      --drawn 0 --time none)
    for tool in memcheck racecheck synccheck; do
      extra=()
      if [ "$tool" = racecheck ]; then extra=(--racecheck-report all); fi
      run "sanitize-$tool" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 3 \
        --print-limit 20 "${gate[@]}"
    done
    ;;
  *)
    echo "unknown phase $phase" >&2
    exit 2
    ;;
  esac
done
