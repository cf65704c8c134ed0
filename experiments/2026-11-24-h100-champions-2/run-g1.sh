# Run G1: the champions of this experiment's searches (genomes/champions/h100, written by
# `evo champions`), each on its own shape with SDPA beside it: f16 with --record and
# --cold-l2 (each launch alone on a flushed L2, kernels and SDPA alike), then bf16.
# Output: $OUT/g1.tgz (the JSON and logs, and the champions folder as recorded).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g1; mkdir -p $R
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
echo "== $E bench --champions genomes/champions/h100 --record --cold-l2 --json bench_f16.json" > $R/bench_f16.txt
timeout 280 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/bench_f16.json >> $R/bench_f16.txt 2>&1
echo "f16 exit $?"
echo "== $E bench --champions genomes/champions/h100 --dtype bf16 --json bench_bf16.json" > $R/bench_bf16.txt
timeout 200 $E bench --champions genomes/champions/h100 --dtype bf16 --json $R/bench_bf16.json >> $R/bench_bf16.txt 2>&1
echo "bf16 exit $?"
cp -r genomes/champions/h100 $R/champions
python3 scripts/bench_best.py $R/bench_f16.json --top 1 | tee $R/best_f16.txt
python3 scripts/bench_best.py $R/bench_bf16.json --top 1 | tee $R/best_bf16.txt
cd $OUT && tar czf g1.tgz g1 && rm -rf g1
