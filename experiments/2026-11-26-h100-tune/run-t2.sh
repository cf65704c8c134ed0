#!/bin/bash
# Run T2: T1's decode shape (B16 H32/8 Lq1 Lk8192 D128 causal-br) again, 7.5 minutes, after
# the cost model learned packed grouped heads and warpgroups that split the keys (its
# features in T1 counted a decode's CTAs as if the heads were not packed). Seeded, as in
# T1, from a champions table without the two Llama-3-8B classes; then one bench, in the
# same run, of the tune's champion and today's on the shape, with PyTorch SDPA's backends,
# warm and cold L2. Needs target/record/evo.xz (`cargo build --release -p evo`).
# Usage (repository root): bash experiments/2026-11-26-h100-tune/run-t2.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/t2; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
FROM=$(mktemp -d)/from
python3 experiments/2026-11-26-h100-tune/drop_classes.py genomes/champions/h100 $FROM \
  b1-h32kv8-l4096-d128-causal b16-h32kv8-lq1-lk8192-d128-causal-br > $R/from.txt 2>&1
t0=$(date +%s)
timeout 530 target/release/evo tune --model llama-3-8b --prefill none --decode 16x8192 \
  --minutes 7.5 --from $FROM --out $R/tune > $R/tune.txt 2>&1
echo "exit $? after $(( $(date +%s) - t0 )) s" >> $R/tune.txt
C=genomes/champions/h100
timeout 50 target/release/evo bench $R/tune/champions/b16-h32kv8-lq1-lk8192-d128-causal-br.toml \
  $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml --problem 16,32,1,8192,128,f16,causal=br,kv=8 \
  --cold-l2 --json $R/compare.json > $R/compare.txt 2>&1
echo "exit $?" >> $R/compare.txt
tail -12 $R/tune.txt; tail -14 $R/compare.txt | cut -c1-120
cd $OUT && tar czf t2.tgz t2 && rm -rf t2
