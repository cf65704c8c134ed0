# Run D4: FAST's L2 flush, written over (the build before, target/record/evo-old) against
# read over (this build, target/record/evo), in one run. First the probe outside evo
# (l2_probe.py: PyTorch SDPA and a plain read after no flush, a write pass or a read
# pass); then the decode rows' kernels timed by both builds, old / new / old, without
# SDPA; then the new build with SDPA beside (its script reads over too); then the
# anchors champions by both builds without SDPA. Output: $OUT/d4.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/d4; mkdir -p $R
NEW=target/record/evo; OLD=target/record/evo-old
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
X=experiments/2026-11-25-h100-decode-2
timeout 120 python3 $X/l2_probe.py > $R/probe.txt 2>&1; echo "probe exit $?"
D=experiments/2026-11-25-h100-decode/candidates
K="$D/h-pack-c1-bn64-st2-s1.toml $D/h-pack-c1-bn64-st4-s4.toml $D/h-pack-c1-bn64-st2-s8.toml"
P="--problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=1"
for b in old new old2; do
  E=$NEW; [ $b != new ] && E=$OLD
  echo "== $E bench $K $P --no-sdpa --json decode-$b.json" > $R/decode-$b.txt
  timeout 100 $E bench $K $P --no-sdpa --json $R/decode-$b.json >> $R/decode-$b.txt 2>&1; echo "decode $b exit $?"
done
echo "== $NEW bench $K $P --cold-l2 --json decode-sdpa.json" > $R/decode-sdpa.txt
timeout 150 $NEW bench $K $P --cold-l2 --json $R/decode-sdpa.json >> $R/decode-sdpa.txt 2>&1; echo "decode sdpa exit $?"
for b in old new; do
  E=$NEW; [ $b = old ] && E=$OLD
  echo "== $E bench --champions genomes/champions/h100 --no-sdpa --json anchors-$b.json" > $R/anchors-$b.txt
  timeout 100 $E bench --champions genomes/champions/h100 --no-sdpa --json $R/anchors-$b.json >> $R/anchors-$b.txt 2>&1; echo "anchors $b exit $?"
done
cat $R/probe.txt
python3 scripts/bench_best.py $R/decode-sdpa.json --top 3 > $R/decode_best.txt 2>&1; cat $R/decode_best.txt
grep -h "µs" $R/decode-old.txt $R/decode-new.txt $R/decode-old2.txt $R/anchors-old.txt $R/anchors-new.txt | grep -v "^kernel" | cut -c1-110
gzip -9 $R/*.json
cd $OUT && tar czf d4.tgz d4 && rm -rf d4
