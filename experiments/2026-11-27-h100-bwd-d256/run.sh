#!/bin/bash
# The Hopper backward at head dim 256: two consumer warpgroups share 64 keys, each holding
# dK and dV of half the columns (dkv_split = "columns", FlashAttention-3's D256 split).
# Run a1: `evo gate` (GREEN's default suite, whose D256 cases every genome here builds,
# + 8 drawn shapes, half of them D256; FAST on the models suite's rows each genome builds,
# warm and cold L2) on the D256 variants below; PyTorch's cuDNN and flash backward at the
# models suite's D256 row (Gemma-2-9B prefill) in the same run.
# Run a2: compute-sanitizer memcheck, racecheck and synccheck over the split genome; an
# exhaustive backward search at that row (refused). Run a3: that search, evolutionary.
# Runs g1 (300 sampled backward genomes through GREEN), b1 (the champions' backward
# table), l1 (a backward landscape at D128) and e1 (the export's gradients): their cases.
# Needs target/record/evo.xz (this commit's evo). Usage (repository root):
#   bash experiments/2026-11-27-h100-bwd-d256/run.sh a1
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-27-h100-bwd-d256
R=$OUT/$1; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
run_logged() {  # log-name time-limit command...
  local log=$R/$1.txt limit=$2; shift 2
  echo "== $*" >> $log
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $log 2>&1
  echo "exit $? ($*)" | tee -a $log
}
case $1 in
a1)
  run_logged baselines 120 python3 scripts/sdpa_backward_baseline.py --shapes "$(cat $X/d256.json)" --backends cudnn,flash --cold-l2
  run_logged gate 420 target/release/evo gate genomes/fa3-bwd-d256.toml $X/seeds/d256-atomic-s2.toml $X/seeds/d256-atomic-s1.toml $X/seeds/d256-separate-s1.toml --time models --json $R/gate.json
  gzip -9 $R/gate.json
  ;;
a2)
  for tool in memcheck racecheck synccheck; do
    run_logged sanitize 100 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate genomes/fa3-bwd-d256.toml --suite $X/sanitize.toml --drawn 0 --time none
  done
  # An exhaustive walk is refused (it walks the product of both backward families' genes,
  # 3,984,768 points), so run a3 searches instead.
  run_logged search-d256 400 target/release/evo evolve --pass backward --strategy exhaustive --problem 1,16,4096,4096,256,f16,causal,kv=8 --minutes 6.5 --experiment $R/search-d256
  ;;
a3)
  # A backward search at Gemma-2-9B's prefill (B1 H16/8 L4096 D256 causal) from the four
  # D256 genomes of seeds/ (of the 24 valid backward genomes at D256, all hopper_bwd with
  # dkv_split = "columns"); then the champions' backward table against cuDNN and flash.
  run_logged search-d256 390 target/release/evo evolve --pass backward --genomes $X/seeds --problem 1,16,4096,4096,256,f16,causal,kv=8 --minutes 6 --experiment $R/search-d256
  ;;
g1)
  # 300 sampled backward genomes through GREEN from fresh seeds (printed): 150 of each
  # family, the Hopper ones drawn valid at D128 (so both dkv_split alleles), the default
  # suite's 23 fixed cases (D256 included) and 2 drawn shapes each.
  run_logged sample-hopper 340 target/release/evo gate --sample 150 --family hopper_bwd --drawn 2 --time none --json $R/sample-hopper.json
  run_logged sample-ampere 220 target/release/evo gate --sample 150 --family ampere_bwd --drawn 2 --time none --json $R/sample-ampere.json
  for f in $R/sample-*.txt; do echo "$f: $(grep -c ': GREEN (backward)' $f) genomes gated, $(grep -c ' pass$' $f) passing rows, $(grep -cE ' FAIL' $f) failing rows"; done
  gzip -9 $R/sample-*.json
  ;;
b1)
  # evo bench --champions --backward: every class's backward genome (D256's from run a3)
  # against cuDNN and flash, warm and cold L2.
  run_logged bench 560 target/release/evo bench --champions genomes/champions/h100 --backward --cold-l2 --json $R/bench.json
  gzip -9 $R/bench.json
  ;;
a4)
  # racecheck and synccheck over split genomes whose producer runs ahead of the consumers:
  # two stages with the red adds (seeds/d256-atomic-s2.toml) and three with the bulk adds
  # at D96 and D128 (columns-d128-s3.toml).
  for g in $X/seeds/d256-atomic-s2.toml $X/columns-d128-s3.toml; do
    for tool in racecheck synccheck; do
      run_logged sanitize 100 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate $g --suite $X/sanitize.toml --drawn 0 --time none
    done
  done
  ;;
e1)
  # The export with the D256 backward: evo_attention.sdpa's gradients against torch SDPA's
  # (scripts/backward_check.py, D256 among its shapes; the fallback checked on a copy of
  # the export without D256's backward). Needs target/record/train/libevo_runtime.so.xz
  # (`cargo build --release -p evo-runtime` of this tree, compressed with python3's lzma).
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/train/libevo_runtime.so.xz target/release/libevo_runtime.so
  EXPORT=$(mktemp -d)/h100
  run_logged export 120 target/release/evo export $EXPORT --champions genomes/champions/h100 --cubin --lib target/release/libevo_runtime.so
  run_logged backward-check 120 python3 scripts/backward_check.py $EXPORT --json $R/backward_check.json
  tail -22 $R/backward-check.txt
  ;;
l1)
  # Every valid Hopper backward genome at B2 H16 L4096 D128 (plan-d128.toml: 268), GREEN's
  # quick suite then FAST; resumed from l1/landscape-d128 by a second call if one is not
  # enough (the folder copied back into this experiment first).
  mkdir -p $R/landscape-d128
  [ -d $X/l1/landscape-d128 ] && cp $X/l1/landscape-d128/* $R/landscape-d128/
  run_logged landscape 560 target/release/evo landscape --plan $X/plan-d128.toml --out $R/landscape-d128
  ;;
esac
grep -E "FAIL|backward warm|ERROR SUMMARY|RACECHECK SUMMARY" $R/*.txt | sed 's/^.*\.txt://' | tail -40
grep "sdpa backward cudnn {" $R/baselines.txt | cut -c1-150
cd $OUT && tar czf $1.tgz $1 && rm -rf $1
