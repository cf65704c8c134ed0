# Run R3: the anchors record again after the SDPA events fix (a call timed alone is
# enqueued behind a GPU spin, so cuDNN's figure no longer holds PyTorch's host dispatch:
# run R2's probe). `evo bench --champions` f16 with cold-L2 rows; `evo export --cubin`
# and scripts/export_check.py against it (same fix); the probe once more, with the held
# rows beside the unheld ones. Binaries built from the commit that adds this script.
# Output: $OUT/r3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r3; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 200 > $R/smi.csv 2>&1 &
SMI=$!
echo "== evo bench --champions genomes/champions/h100 --cold-l2 --json bench.json" > $R/bench.txt
timeout 280 $E bench --champions genomes/champions/h100 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json > $R/bench_best.txt 2>&1
echo "== evo export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 120 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
timeout 90 python3 experiments/2026-11-25-h100-record/probe.py $R/x r3 > $R/probe.txt 2>&1; echo "probe exit $?"
kill $SMI; rm -rf $R/x
cut -c1-110 $R/probe.txt | grep -E "held|graph|before each  "; tail -10 $R/export_check.txt; cat $R/bench_best.txt
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
