#!/bin/bash
# Run T1: `evo tune --model llama-3-8b` on the two Llama-3-8B shapes the record's
# champions cover (prefill B1 H32/8 L4096 D128 causal, decode B16 H32/8 Lq1 Lk8192),
# 3 minutes a shape, seeded from a champions table WITHOUT those two classes (as for a
# model evo never searched); then one bench, in the same run, of the tune's champions
# and today's on both shapes, with PyTorch SDPA's backends, warm and cold L2.
# Needs target/record/evo.xz (`cargo build --release -p evo`).
# Usage (repository root): bash experiments/2026-11-26-h100-tune/run-t1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/t1; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
FROM=$(mktemp -d)/from
python3 experiments/2026-11-26-h100-tune/drop_classes.py genomes/champions/h100 $FROM \
  b1-h32kv8-l4096-d128-causal b16-h32kv8-lq1-lk8192-d128-causal-br > $R/from.txt 2>&1
t0=$(date +%s)
timeout 480 target/release/evo tune --model llama-3-8b --prefill 4096 --decode 16x8192 \
  --minutes 3 --from $FROM --out $R/tune > $R/tune.txt 2>&1
echo "exit $? after $(( $(date +%s) - t0 )) s" >> $R/tune.txt
C=genomes/champions/h100
timeout 100 target/release/evo bench $R/tune/champions/b1-h32kv8-l4096-d128-causal.toml \
  $R/tune/champions/b16-h32kv8-lq1-lk8192-d128-causal-br.toml \
  $C/b1-h32kv8-l4096-d128-causal.toml $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml \
  --problem 1,32,4096,4096,128,f16,causal,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=8 \
  --cold-l2 --json $R/compare.json > $R/compare.txt 2>&1
echo "exit $?" >> $R/compare.txt
tail -25 $R/tune.txt; tail -30 $R/compare.txt
cd $OUT && tar czf t1.tgz t1 && rm -rf t1
