# Run R9: probe3.py (this folder) on the exported seed champions, then `evo bench
# --champions` f16 and export_check.py against it, whose input sets are now slices of
# one buffer per tensor redrawn with one launch each, as FAST's slots. Output: $OUT/r9.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r9; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
$E export $R/x --champions genomes/champions/h100 --cubin > $R/export.txt 2>&1; echo "export exit $?"
timeout 60 python3 experiments/2026-11-25-h100-record/probe3.py $R/x > $R/probe3.txt 2>&1; echo "probe3 exit $?"; cat $R/probe3.txt
echo "== evo bench --champions genomes/champions/h100 --json bench.json" > $R/bench.txt
timeout 150 $E bench --champions genomes/champions/h100 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 150 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
rm -rf $R/x; tail -10 $R/export_check.txt
gzip -9 $R/bench.json
cd $OUT && tar czf r9.tgz r9 && rm -rf r9
