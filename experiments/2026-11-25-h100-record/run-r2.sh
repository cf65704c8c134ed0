# Run R2: why the exported champions timed 9-10% slower than `evo bench` in run R1 on the
# two long non-causal rows. probe.py (this folder) times them and cuDNN under variations
# of the events method, before and after `evo bench` of the same two champions (no SDPA);
# nvidia-smi logs clocks, power and throttle reasons every 100 ms throughout.
# Output: $OUT/r2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r2; mkdir -p $R
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
$E export $R/x --champions genomes/champions/h100 --cubin > $R/export.txt 2>&1; echo "export exit $?"
python3 experiments/2026-11-25-h100-record/probe.py $R/x first > $R/probe.txt 2>&1; echo "probe 1 exit $?"
echo "== $E bench genomes/champions/h100/b1-h16-l8192-d128.toml genomes/champions/h100/b2-h16-l4096-d128.toml --suite anchors --no-sdpa --json bench.json" > $R/bench.txt
date -u +%T >> $R/bench.txt
timeout 150 $E bench genomes/champions/h100/b1-h16-l8192-d128.toml genomes/champions/h100/b2-h16-l4096-d128.toml --suite anchors --no-sdpa --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
date -u +%T >> $R/bench.txt
python3 experiments/2026-11-25-h100-record/probe.py $R/x second >> $R/probe.txt 2>&1; echo "probe 2 exit $?"
kill $SMI
cat $R/probe.txt | cut -c1-120; grep -E "L8192 D128 f16:|L4096 D128 f16:" $R/bench.txt
rm -rf $R/x; cd $OUT && tar czf r2.tgz r2 && rm -rf r2
