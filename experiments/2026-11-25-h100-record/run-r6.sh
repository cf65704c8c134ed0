# Run R6: the record of issue 17 and the export check of issue 19 after runs R2-R5
# (SDPA's and the export's single calls enqueued behind a GPU spin; export_check.py takes
# its events before its graph figures, as FAST does). `evo bench --champions` f16 and
# bf16 with cold-L2 rows, the export of the same champions checked against the f16 bench.
# Output: $OUT/r6.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r6; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
for dt in f16 bf16; do
  echo "== evo bench --champions genomes/champions/h100 --dtype $dt --cold-l2 --json bench-$dt.json" > $R/bench-$dt.txt
  timeout 200 $E bench --champions genomes/champions/h100 --dtype $dt --cold-l2 --json $R/bench-$dt.json >> $R/bench-$dt.txt 2>&1; echo "bench $dt exit $?"
  python3 scripts/bench_best.py $R/bench-$dt.json > $R/bench_best-$dt.txt 2>&1
done
echo "== evo export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== python3 scripts/export_check.py X --bench bench-f16.json" > $R/export_check.txt
timeout 120 python3 scripts/export_check.py $R/x --bench $R/bench-f16.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
rm -rf $R/x
tail -10 $R/export_check.txt; cat $R/bench_best-f16.txt; grep -v "cold" $R/bench_best-bf16.txt | grep -A1 "cuDNN"
cd $OUT && tar czf r6.tgz r6 && rm -rf r6
