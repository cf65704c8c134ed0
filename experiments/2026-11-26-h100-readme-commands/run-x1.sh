#!/bin/bash
# Run X1: the README's export commands as the README gives them, in a copy of the
# repository as committed (no out/ and no bench.json before), then the candle example's
# GPU test and binary on that export. Needs target/record/{evo,libevo_runtime.so,
# candle-gpu-test,evo-candle-attention}.xz: `cargo build --release --workspace` at the
# commit that adds this script, and the example's `cargo test --features gpu --test gpu
# --no-run` and `cargo build` (debug: what is checked is the op, not its speed) with
# .cuda/env.sh sourced.
# Usage (repository root): bash experiments/2026-11-26-h100-readme-commands/run-x1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/x1; mkdir -p $R target/release
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$1.xz $2 && chmod +x $2; }
unxz evo target/release/evo; unxz libevo_runtime.so target/release/libevo_runtime.so
unxz candle-gpu-test target/record/candle-gpu-test; unxz evo-candle-attention target/record/evo-candle-attention
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
ls out bench.json > $R/before.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc" >> $R/$name.txt; echo "$name: exit $rc ($*)"
}
step export 150 target/release/evo export out/h100 --champions genomes/champions/h100 --cubin
step bench 230 target/release/evo bench --champions genomes/champions/h100 --json bench.json
cp bench.json $R/ 2>/dev/null
step export-check 150 python3 scripts/export_check.py out/h100 --bench bench.json
tail -30 $R/export-check.txt
( cd examples/candle-attention && EVO_EXPORT_DIR=$PWD/../../out/h100 timeout 60 ../../target/record/candle-gpu-test --test-threads=1 ) > $R/candle.txt 2>&1; echo "candle gpu test: exit $?"
timeout 60 target/record/evo-candle-attention out/h100 --causal >> $R/candle.txt 2>&1; echo "candle binary: exit $?"
grep -E "test result|passed|failed|error" $R/candle.txt | tail -5
cd $OUT && tar czf x1.tgz x1 && rm -rf x1
