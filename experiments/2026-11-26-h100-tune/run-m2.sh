#!/bin/bash
# Run M2: as M1 with the CUBIN cache off (EVO_CUBIN_CACHE=off: every variant compiled, as in
# a first tune; in M1 the second run took the first run's cached CUBINs) and the order
# reversed: two GPUs (--gpus 0,1) first, then one (--gpus 0). As M1: the same six-shape tune on
# one and two GPUs, 10 evaluations a shape, no bench: the wall time of each, and each
# shape's champion. The shapes: the 2048-key prefills of six presets (every head dim,
# grouped and not). Needs target/record/evo.xz (`cargo build --release -p evo`).
# Usage (repository root): bash experiments/2026-11-26-h100-tune/run-m2.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/m2; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; } > $R/info.txt 2>&1
cat > $R/shapes.txt <<'SHAPES'
# 2048-key prefills: Llama-3-8B, Llama-3-70B, Mistral-7B, Qwen2.5-7B, Phi-3-mini, Gemma-2-9B
1,32,2048,2048,128,f16,causal,kv=8
1,64,2048,2048,128,f16,causal,kv=8
1,28,2048,2048,128,f16,causal,kv=4
1,32,2048,2048,96,f16,causal
1,16,2048,2048,256,f16,causal,kv=8
1,32,2048,2048,64,f16,causal
SHAPES
export EVO_CUBIN_CACHE=off
for gpus in 0,1 0; do
  t0=$(date +%s)
  timeout 260 target/release/evo tune --problems $R/shapes.txt --budget 10 --gpus $gpus \
    --no-bench --out $R/gpus-${gpus/,/} > $R/gpus-${gpus/,/}.txt 2>&1
  echo "exit $? after $(( $(date +%s) - t0 )) s" >> $R/gpus-${gpus/,/}.txt
  echo "RESULT gpus=$gpus wall_s=$(( $(date +%s) - t0 ))" | tee -a $R/results.txt
done
grep -h "^\[" $R/gpus-*.txt
cd $OUT && tar czf m2.tgz m2 && rm -rf m2
