# Run X1: the export's check (issue 19) with the bench on both sides repeated.
# `evo export` of genomes/champions/h100 (CUBINs and the shared library); three
# `evo bench --champions` runs (the first with PyTorch SDPA beside it, f16), then
# scripts/export_check.py with --rounds 3 against the three: each row timed three times
# from PyTorch, the rounds one after another over all seven rows, the median round
# against the median of the three bench figures.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit
# that adds this script). From the repository root:
#   bash experiments/2026-11-25-h100-export/run-x1.sh
# Output: $OUT/x1.tgz (x1/summary.txt holds the table).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-x1-out}
R=$OUT/x1; mkdir -p $R
C=genomes/champions/h100
E=target/record/evo
X=$(mktemp -d X)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } > $R/info.txt 2>&1
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
for i in 1 2 3; do
  sdpa=""; [ $i = 1 ] || sdpa="--no-sdpa"
  echo "== $E bench --champions $C --json bench-$i.json $sdpa" > $R/bench-$i.txt
  date -u +%T >> $R/bench-$i.txt
  timeout 230 $E bench --champions $C --json $R/bench-$i.json $sdpa >> $R/bench-$i.txt 2>&1; echo "bench $i exit $?"
  grep -E "^champion .* µs \(" $R/bench-$i.txt | sed "s/^/bench $i: /" >> $S
done
echo "== python3 scripts/export_check.py X --rounds 3 --bench bench-1.json --bench bench-2.json --bench bench-3.json" > $R/export_check.txt
date -u +%T >> $R/export_check.txt
timeout 240 python3 scripts/export_check.py $X --rounds 3 --bench $R/bench-1.json --bench $R/bench-2.json \
  --bench $R/bench-3.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
date -u +%T >> $R/export_check.txt
tail -13 $R/export_check.txt >> $S
grep -A12 "ratio" $R/bench-1.txt | head -40 > $R/bench-table.txt
rm -rf $X
gzip -9 $R/bench-*.json
cat $S
cd $OUT && tar czf x1.tgz x1 && rm -rf x1
