#!/bin/bash
# The Llama-3-8B tune's champions (experiments/2026-11-27-h100x4-llama-2) benched again on
# one H100, against every PyTorch SDPA backend, warm and on a cold L2: that tune's own
# bench lost its SDPA table to one shape's float64 reference (since fixed).
# Usage (repository root, one GPU): OUT=DIR bash experiments/2026-11-27-h100-tune-bench/run.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/tune-bench; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
cp -r experiments/2026-11-27-h100x4-llama-2/x1/tune/tune/champions $R/champions
s=$(date +%s)
target/release/evo bench --champions $R/champions --record --cold-l2 --json $R/bench.json > $R/bench.log 2>&1
echo "evo bench exit $? after $(( $(date +%s) - s )) s" | tee -a $R/info.txt
python3 scripts/bench_best.py $R/bench.json --top 1 > $R/best.txt 2>&1; cat $R/best.txt | tail -30
