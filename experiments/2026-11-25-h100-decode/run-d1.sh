# Run D1: the decode rows of the models suite (issue 18) screened over a grid of packed
# candidates (candidates/: the Hopper family with one consumer warpgroup over block_n,
# stages and split_kv; the Ampere family over block_m/warps, block_n, stages, split_kv),
# each through GREEN's quick suite, then FAST on the two decode rows, SDPA beside them.
# Output: $OUT/d1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/d1; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=experiments/2026-11-25-h100-decode/candidates
echo "== evo bench candidates/*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=1 --json bench.json" > $R/bench.txt
timeout 480 $E bench $C/*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=1 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 5 > $R/bench_best.txt 2>&1; cat $R/bench_best.txt
gzip -9 $R/bench.json
cd $OUT && tar czf d1.tgz d1 && rm -rf d1
