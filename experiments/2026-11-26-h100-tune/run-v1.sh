#!/bin/bash
# Run V1: the GPU commands `just gpu-test` adds for the guided search and `evo tune`, with
# the commit's binary, on one H100 (the recipe itself needs cargo on the device).
# Needs target/record/evo.xz (`cargo build --release -p evo`).
# Usage (repository root): bash experiments/2026-11-26-h100-tune/run-v1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/v1; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  local t0=$(date +%s)
  timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc after $(( $(date +%s) - t0 )) s" >> $R/$name.txt; echo "$name: exit $rc"
}
step guided 120 target/release/evo evolve --strategy guided --problem 2,16,4096,4096,128,f16 --budget 8 --experiment $R/guided
step tune-model 200 target/release/evo tune --model llama-3-8b --prefill 2048 --decode 16x8192 --budget 6 --gpus all --out $R/tune-model
step tune-seed 120 target/release/evo tune --problem 1,8,512,512,64,f16 --budget 6 --out $R/tune-seed
tail -4 $R/guided.txt; tail -8 $R/tune-model.txt; tail -5 $R/tune-seed.txt
cd $OUT && tar czf v1.tgz v1 && rm -rf v1
