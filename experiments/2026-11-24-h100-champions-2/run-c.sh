# Run C: exp = "exp2_fma" (every other score's exponential on the FMA pipe) and the
# Hopper template's MUFU.EX2 without denormal scaling: GREEN over 60 sampled genomes of
# each family (a third draw exp2_fma); then `evo bench --cold-l2` of run B's best
# L1024 genomes, the seed-shape champions and the best D128 candidates, each with its
# exp2_fma twin, on the anchors with PyTorch SDPA beside them. Output under $OUT/c.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/c; mkdir -p $R
E=target/release/evo
X=experiments/2026-11-24-h100-champions-2
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
for fam in hopper ampere; do
  echo "== EVO_PERSISTENT_GRID=7 $E gate --sample 60 --family $fam --suite default --time none" > $R/sample-$fam.txt
  EVO_PERSISTENT_GRID=7 timeout 90 $E gate --sample 60 --family $fam --suite default --time none --json $R/sample-$fam.json >> $R/sample-$fam.txt 2>&1
  echo "sample $fam exit $?"; tail -1 $R/sample-$fam.txt; grep -c exp2_fma $R/sample-$fam.json
done
G="$X/candidates/l1k-best.toml $X/candidates/l1k-best-fma.toml $X/candidates/l1kc-best.toml $X/candidates/l1kc-best-fma.toml genomes/champions/h100/b1-h8-l512-d64.toml $X/candidates/b1-h8-l512-d64-fma.toml genomes/champions/h100/b1-h8-l512-d64-causal.toml $X/candidates/b1-h8-l512-d64-causal-fma.toml $X/candidates/d128-bn160-pers.toml $X/candidates/d128-bn160-pers-fma.toml $X/candidates/d128-bn176.toml $X/candidates/d128-bn176-fma.toml"
echo "== $E bench $G --suite anchors --dtype f16 --cold-l2 --json bench.json" > $R/bench.txt
timeout 420 $E bench $G --suite anchors --dtype f16 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 3 | tee $R/best.txt
cd $OUT && tar czf c.tgz c && rm -rf c
