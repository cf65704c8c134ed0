#!/usr/bin/env bash
# The GPU records under experiments/, in one script: each phase writes its raw output
# (text and JSON) into $RESULTS/<phase>/, so what is committed is exactly what ran.
#
#   scripts/gpu_evidence.sh RESULTS_DIR PHASE...
#
# Phases:
#   info        nvidia-smi, driver, torch and CUDA versions
#   gate        evo gate on every named genome + 200 sampled valid genomes, default suite
#   adversarial evo gate on tests/kernels/*.cu (all but naive.cu must be rejected)
#   gputest     the GPU test set (a test binary built with `--features gpu`, see below)
#   bench       evo bench of the named genomes vs cuBLAS hybrid and PyTorch SDPA
#   landscape   evo landscape over experiments/2026-11-22-h100-landscape/plan.toml
#   evolve      evo evolve on the GPU, 200 evaluations, seed 1
#   drill       the fault drill: a GPU search with planted faulting and hanging kernels
#   replay      evo replay of the seeds' lineage on this GPU
#
# Needs: EVO (the evo binary, default target/release/evo); for gputest, GATES_GPU_TESTS
# (the binary of `cargo test -p evo-gates --features gpu --release --no-run`).
set -uo pipefail
results=${1:?results dir}
shift
evo=${EVO:-target/release/evo}
mkdir -p "$results"

run() { # name, command...: time it, keep stdout+stderr, never stop the script
  local name=$1
  shift
  mkdir -p "$results/$name"
  echo "== $name: $*" | tee "$results/$name/command.txt"
  local start=$SECONDS
  "$@" >"$results/$name/output.txt" 2>&1
  local rc=$?
  echo "exit $rc after $((SECONDS - start)) s" | tee -a "$results/$name/command.txt"
  tail -n 25 "$results/$name/output.txt"
}

for phase in "$@"; do
  case $phase in
  info)
    mkdir -p "$results/info"
    {
      date -u +%FT%TZ
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm --format=csv
      python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
      ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
    } >"$results/info/info.txt" 2>&1
    cat "$results/info/info.txt"
    ;;
  gate)
    run gate "$evo" gate genomes/*.toml --sample 200 --suite default --time seed --seed 2026 \
      --json "$results/gate/gate.json"
    ;;
  adversarial)
    srcs=()
    # The forward's kernels only: the backward ones (bwd_*.cu) go through the backward
    # gate in a run of their own (experiments/2026-11-26-h100-bwd-gate/run-g4.sh).
    for f in tests/kernels/*.cu; do
        [[ $(basename "$f") == bwd_* ]] && continue
        srcs+=(--source "$f")
    done
    run adversarial "$evo" gate "${srcs[@]}" --suite default --time none --seed 2026 \
      --json "$results/adversarial/adversarial.json"
    ;;
  gputest)
    run gputest env EVO_REPO="$PWD" "${GATES_GPU_TESTS:?}" gpu_tests --test-threads=1
    ;;
  bench)
    run bench "$evo" bench genomes/{v3,v5,v6a,v7a,phase4,phase6,fa2}.toml --suite anchors \
      --json "$results/bench/bench.json"
    ;;
  landscape)
    mkdir -p "$results/landscape"
    cp experiments/2026-11-22-h100-landscape/plan.toml "$results/landscape/"
    run landscape-log "$evo" landscape --plan "$results/landscape/plan.toml" \
      --out "$results/landscape" --timeout 60
    ;;
  evolve)
    run evolve "$evo" evolve --backend gpu --strategy evolutionary --budget 200 --seed 1 \
      --experiment "$results/evolve/experiment" --quiet
    ;;
  drill)
    run drill "$evo" evolve --backend gpu --strategy random --budget 30 --seed 7 \
      --plant-faults 5 --timeout 15 --experiment "$results/drill/experiment" --quiet
    ;;
  replay)
    mkdir -p "$results/replay"
    cp -r experiments/seed-lineage "$results/replay/seed-lineage"
    run replay "$evo" replay "$results/replay/seed-lineage" --all
    ;;
  *)
    echo "unknown phase $phase" >&2
    exit 2
    ;;
  esac
done
