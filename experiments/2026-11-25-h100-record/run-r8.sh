# Run R8: export_check.py times a graph row as FAST does (one captured call per input
# set, the sets drawn again and L2 written over before each replay) instead of
# sdpa_baseline.py's back-to-back rotation, which it still prints beside; runs R3-R7 had
# the seed rows 3-5% slower by the latter. `evo bench --champions` f16 and the export
# check against it. Output: $OUT/r8.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r8; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --json bench.json" > $R/bench.txt
timeout 150 $E bench --champions genomes/champions/h100 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
echo "== evo export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 150 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
rm -rf $R/x; tail -10 $R/export_check.txt
cd $OUT && tar czf r8.tgz r8 && rm -rf r8
