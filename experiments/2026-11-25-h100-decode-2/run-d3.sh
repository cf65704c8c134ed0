# Run D3: the split-KV combine rewritten (kernels/combine.cuh: one lane per split, every
# split's loads in flight together) on the two decode rows of the models suite (issue 18).
# GREEN first (default suite, fresh seed) on split kernels of both families, then FAST on
# the decode rows over the split grid, SDPA beside it. Output: $OUT/d3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/d3; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
D=experiments/2026-11-25-h100-decode/candidates; N=experiments/2026-11-25-h100-decode-2/candidates
G="$D/h-pack-c1-bn64-st2-s8.toml $D/h-pack-c1-bn64-st3-s16.toml $N/h-pack-c1-bn64-st2-s32.toml $D/a-pack-bm32-w2-bn64-st3-s8.toml $D/a-pack-bm16-w1-bn64-st2-s32.toml"
echo "== evo gate $G --time none --json green.json" > $R/green.txt
timeout 150 $E gate $G --time none --json $R/green.json >> $R/green.txt 2>&1; echo "green exit $?"
grep -E "^(PASS|FAIL)|pass|fail" $R/green.txt | tail -8
K="$D/h-pack-c1-bn64-st2-s1.toml $D/h-pack-c1-bn64-st2-s2.toml"
for s in 4 8 16; do for st in 2 3 4; do K="$K $D/h-pack-c1-bn64-st$st-s$s.toml"; done; done
K="$K $N/h-pack-c1-bn64-st2-s32.toml $N/h-pack-c1-bn64-st3-s32.toml $N/h-pack-c1-bn64-st4-s32.toml"
K="$K $D/h-pack-c1-bn128-st2-s4.toml $D/h-pack-c1-bn128-st2-s8.toml $D/h-pack-c1-bn128-st2-s16.toml $N/h-pack-c1-bn128-st2-s32.toml"
K="$K $D/a-pack-bm32-w2-bn64-st3-s8.toml $D/a-pack-bm32-w2-bn64-st3-s16.toml $D/a-pack-bm64-w4-bn64-st3-s8.toml"
P="--problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=1"
echo "== evo bench <$(echo $K | wc -w) kernels> $P --json bench.json" > $R/bench.txt
echo "$K" | tr ' ' '\n' >> $R/bench.txt
timeout 330 $E bench $K $P --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 6 > $R/bench_best.txt 2>&1; cat $R/bench_best.txt
gzip -9 $R/bench.json $R/green.json
cd $OUT && tar czf d3.tgz d3 && rm -rf d3
