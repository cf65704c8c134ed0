#!/usr/bin/env bash
# The Hopper family's GPU record (experiments/2026-11-23-h100-hopper), in one call:
#
#   scripts/hopper_evidence.sh RESULTS_DIR
#
# 1. info       nvidia-smi, driver
# 2. bench      evo bench of fa2 and fa3 against the cuBLAS hybrid and PyTorch SDPA on the
#               anchors suite, f16 then bf16 (one run each, SDPA in the same process run)
# 3. sweep      evo gate: the named genomes and 300 Hopper genomes drawn from the valid
#               space (--family hopper), default suite plus 6 shapes drawn from the seed,
#               no timing
# 4. sanitize   compute-sanitizer memcheck, racecheck, synccheck over fa3 and the
#               ablations, quick suite without drawn shapes (each launch costs 100x there)
# 5. ablations  evo bench of fa3 and its one-gene ablations (experiments/.../ablations), f16
#
# Needs: EVO (the evo binary, default target/release/evo), CUDA in /usr/local/cuda.
set -uo pipefail
results=${1:?results dir}
evo=${EVO:-target/release/evo}
exp=experiments/2026-11-23-h100-hopper
mkdir -p "$results"
run() { # name, command...: time it, keep stdout+stderr, never stop the script
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$results/commands.txt"
  local start=$SECONDS
  "$@" >"$results/$name.txt" 2>&1
  local rc=$?
  echo "exit $rc after $((SECONDS - start)) s" | tee -a "$results/commands.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >"$results/info.txt" 2>&1
run bench_f16 "$evo" bench genomes/fa2.toml genomes/fa3.toml --json "$results/bench_f16.json"
run bench_bf16 "$evo" bench genomes/fa2.toml genomes/fa3.toml --dtype bf16 --json "$results/bench_bf16.json"
run sweep "$evo" gate genomes/*.toml --sample 300 --family hopper --suite default --time none --json "$results/sweep.json"
cs=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  run "sanitize_$tool" timeout 200 "$cs" --tool "$tool" --print-limit 20 \
    "$evo" gate genomes/fa3.toml $exp/ablations/*.toml --suite quick --drawn 0 --time none
done
run ablations "$evo" bench genomes/fa3.toml $exp/ablations/*.toml --no-sdpa --json "$results/ablations.json"
echo "== summary"
for f in bench_f16 bench_bf16; do grep -A 8 "^B2 H16 L4096 D128" "$results/$f.txt" | grep -E "^(fa2|fa3|sdpa-cudnn) "; done
tail -1 "$results/sweep.txt"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$results"/sanitize_*.txt
