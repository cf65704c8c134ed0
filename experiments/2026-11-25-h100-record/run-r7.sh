# Run R7: the record after FAST's graph method writes over L2 between the draw and the
# replay (run R6: the seed shape's graph figure was ~4% under the same kernel's through
# the export, timed as the SDPA baselines are). `evo bench --champions` f16 with cold-L2
# rows; the export check against it; GREEN on two 9-warp Ampere genomes that the
# register-cap fix (fullest warp-scheduler quarter) makes launchable (quick suite and the
# six D64/D128 drawn shapes). Output: $OUT/r7.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r7; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --cold-l2 --json bench.json" > $R/bench.txt
timeout 200 $E bench --champions genomes/champions/h100 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json > $R/bench_best.txt 2>&1
echo "== evo export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 120 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
rm -rf $R/x
G=experiments/2026-11-25-h100-record/genomes
echo "== evo gate $G/w9-128-128.toml $G/w9-128-64.toml --suite quick --drawn 6 --time none" > $R/w9.txt
timeout 100 $E gate $G/w9-128-128.toml $G/w9-128-64.toml --suite quick --drawn 6 --time none >> $R/w9.txt 2>&1; echo "w9 gate exit $?"
tail -3 $R/w9.txt; tail -10 $R/export_check.txt; cat $R/bench_best.txt
cd $OUT && tar czf r7.tgz r7 && rm -rf r7
