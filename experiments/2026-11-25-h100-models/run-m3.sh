# Run M3: the models suite's first table: the named genomes and the anchors' champions
# on `evo bench --suite models` (f16, graph replay and cold L2) beside every PyTorch
# SDPA backend that states each problem (cuDNN, flash, efficient, FlexAttention; K/V
# expanded only where a backend refuses grouped heads, named so). Also: the one
# genome of run M2's Ampere sample that failed (a launch out of resources), saved and
# compiled for its resource report.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/m3; mkdir -p $R
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
timeout 60 $E gate --sample 129 --family ampere --seed 2865563562376472 --save-samples $R/samples --start 129 --suite quick --drawn 0 --time none > $R/sample128.txt 2>&1
ls $R/samples | grep -v sample128 | while read f; do rm $R/samples/$f; done
cat $R/samples/*.toml >> $R/sample128.txt 2>&1
$E compile $R/samples/*.toml --arch sm_90 >> $R/sample128.txt 2>&1
tail -12 $R/sample128.txt
G="genomes/fa3.toml genomes/fa2.toml $(ls genomes/champions/h100/b*.toml)"
echo "== $E bench $G --suite models --dtype f16 --cold-l2 --json bench.json" > $R/bench.txt
timeout 420 $E bench $G --suite models --dtype f16 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
grep -vE "^\[|^ *$" $R/bench.txt | tail -45
cd $OUT && tar czf m3.tgz m3 && rm -rf m3
