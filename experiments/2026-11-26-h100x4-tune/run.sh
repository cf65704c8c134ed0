#!/bin/bash
# Runs X1 and X2 of this folder's README on a host of four GPUs: one `evo tune` of eight
# prefill shapes on four GPUs (--gpus 0,1,2,3), then the same on one (--gpus 0), with
# the CUBIN cache off (every variant compiled, as in a first tune) and no bench; the wall
# time of each and each shape's champion.
#   x1: 12 evaluations a shape, no seed, the shapes listed costliest first by hand;
#   x2: 24 evaluations a shape, --seed 1, the shapes in a preset's order (the tune starts
#       the costliest first itself).
# Needs target/record/evo.xz (`cargo build --release -p evo`, xz-compressed).
# Usage (repository root): bash experiments/2026-11-26-h100x4-tune/run.sh x1|x2
set -u
run=${1:?usage: bash experiments/2026-11-26-h100x4-tune/run.sh x1|x2}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 EVO_CUBIN_CACHE=off
R=$OUT/$run
mkdir -p "$R" target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
  target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; echo "cores: $(nproc)"; } >"$R/info.txt" 2>&1

# A causal f16 prefill of batch 1: HEADS KEYS HEAD_DIM [KV_HEADS].
prefill() { echo "1,$1,$2,$2,$3,f16,causal${4:+,kv=$4}"; }
case $run in
x1)
  options=(--budget 12) limit=420
  for s in "16 2048 256 8" "32 4096 128 8" "28 4096 128 4" "64 2048 128 8" "32 2048 128 8" \
    "28 2048 128 4" "32 2048 96" "32 2048 64"; do prefill $s; done >"$R/shapes.txt"
  ;;
x2)
  options=(--budget 24 --seed 1) limit=440
  for s in "32 2048 128 8" "64 2048 128 8" "28 2048 128 4" "32 2048 96" "16 2048 256 8" \
    "32 2048 64" "32 4096 128 8" "28 4096 128 4"; do prefill $s; done >"$R/shapes.txt"
  ;;
*) echo "unknown run $run: x1 or x2" >&2; exit 2 ;;
esac

for gpus in 0,1,2,3 0; do
  name=gpus-${gpus//,/} started=$SECONDS
  timeout $limit target/release/evo tune --problems "$R/shapes.txt" "${options[@]}" --gpus $gpus \
    --no-bench --out "$R/$name" >"$R/$name.txt" 2>&1
  echo "exit $? after $((SECONDS - started)) s" >>"$R/$name.txt"
  echo "RESULT gpus=$gpus wall_s=$((SECONDS - started))" | tee -a "$R/results.txt"
done
cat "$R/info.txt"
grep -h "^\[" "$R"/gpus-*.txt
for log in "$R"/gpus-*/searches/*.log; do
  echo "${log#"$R"/}: $(grep -hE 'GPU [0-9]:|compiles:' "$log" | tr -s ' ' | tr '\n' ' ')"
done
cd "$OUT" && tar czf $run.tgz $run && rm -rf $run
