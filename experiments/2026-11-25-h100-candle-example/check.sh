#!/usr/bin/env bash
# What ran on the H100 for this record: unpacks gpu-bundle.tar.xz (the binary, the GPU
# test binary, two exports; README.md says how each was built), then runs each check.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RUST_BACKTRACE=0
cd examples/candle-attention/target && mkdir -p b && tar -xJf gpu-bundle.tar.xz -C b && cd b || exit 1
bin=release/evo-candle-attention
ex=export-h100
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { echo; echo "\$ evo-candle-attention $*"; timeout 120 $bin "$@"; echo "exit status $?"; }
for dtype in f16 bf16; do
  for shape in "1,8,512,64" "1,8,512,64 --causal" "4,16,1024,64" "4,16,1024,64 --causal" \
               "2,16,4096,128" "2,16,4096,128 --causal" "1,16,8192,128"; do
    run $ex --dtype $dtype --shape $shape
  done
done
run $ex --causal --own-stream --dtype bf16
run $ex --shape 2,8,77,1000,128 --causal
run export-h100-ptx
echo; echo '$ (no LD_LIBRARY_PATH)'; env -u LD_LIBRARY_PATH $bin $ex; echo "exit status $?"
echo; echo '$ (CUDA_VISIBLE_DEVICES=)'; CUDA_VISIBLE_DEVICES= $bin $ex; echo "exit status $?"
run $ex --gpu 7
echo; echo '$ gpu tests'
EVO_EXPORT_DIR=$ex timeout 300 ./gpu-tests --test-threads=1; echo "exit status $?"
