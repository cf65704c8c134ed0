# Run R5: probe2.py (this folder) replays export_check.py's steps for the L8192 class and
# times the exported champion (held events) after each. Output: $OUT/r5.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r5; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
$E export $R/x --champions genomes/champions/h100 --cubin > $R/export.txt 2>&1; echo "export exit $?"
timeout 200 python3 experiments/2026-11-25-h100-record/probe2.py $R/x > $R/probe2.txt 2>&1; echo "probe2 exit $?"
cat $R/probe2.txt; rm -rf $R/x
cd $OUT && tar czf r5.tgz r5 && rm -rf r5
