# Run R4: run R3's export check found the exported L8192 / L4096 champions ~9% slower
# than `evo bench` by both methods, while probe.py, on the same export in the same run,
# matched bench within 0.1% (held events). export_check.py now times before its float64
# reference check; probe.py adds rows timed right after such a reference. `evo bench
# --champions` f16 with cold-L2 rows again (the record of issue 17), the export check
# against it, the probe. Output: $OUT/r4.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r4; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --cold-l2 --json bench.json" > $R/bench.txt
timeout 280 $E bench --champions genomes/champions/h100 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json > $R/bench_best.txt 2>&1
echo "== evo export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 120 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
timeout 100 python3 experiments/2026-11-25-h100-record/probe.py $R/x r4 > $R/probe.txt 2>&1; echo "probe exit $?"
rm -rf $R/x
cut -c1-110 $R/probe.txt | grep -E "held|graph"; tail -10 $R/export_check.txt; grep -A1 "D128" $R/bench_best.txt
cd $OUT && tar czf r4.tgz r4 && rm -rf r4
