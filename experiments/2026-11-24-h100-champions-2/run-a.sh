# Run A: the persistent grid and the new K/V tiles, first contact. The GPU test set;
# GREEN over the candidates, the champions, fa3 and 120 sampled genomes of each family
# (persistent kernels launched on a grid of 7 CTAs, so every CTA loops over several
# tiles); memcheck and synccheck over persistent candidates on the sanitizer's small
# odd shapes (grid of 3); then `evo bench` of candidates and champions on the anchors
# with PyTorch SDPA beside them. Output under $OUT/a (tarred).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/a; mkdir -p $R
E=target/release/evo
T=$(ls target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
X=experiments/2026-11-24-h100-champions-2
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD timeout 150 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" $R/gpu-test.txt | head -5
C=$(ls $X/candidates/*.toml genomes/champions/h100/b*.toml)
echo "== EVO_PERSISTENT_GRID=7 $E gate $C genomes/fa3.toml --suite default --time none --json green.json" > $R/green.txt
EVO_PERSISTENT_GRID=7 timeout 150 $E gate $C genomes/fa3.toml --suite default --time none --json $R/green.json >> $R/green.txt 2>&1
echo "green exit $?"; tail -4 $R/green.txt
for fam in hopper ampere; do
  echo "== EVO_PERSISTENT_GRID=7 $E gate --sample 120 --family $fam --suite default --time none" > $R/sample-$fam.txt
  EVO_PERSISTENT_GRID=7 timeout 120 $E gate --sample 120 --family $fam --suite default --time none --json $R/sample-$fam.json >> $R/sample-$fam.txt 2>&1
  echo "sample $fam exit $?"; tail -3 $R/sample-$fam.txt
done
S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck synccheck; do
  echo "== EVO_PERSISTENT_GRID=3 $S --tool $tool $E gate (persistent candidates) --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/sanitize-$tool.txt
  EVO_PERSISTENT_GRID=3 timeout 100 $S --tool $tool --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate $X/candidates/l1k-pers.toml $X/candidates/d128c-pers.toml $X/candidates/l1kc-wg3-bn128-noov-pers.toml --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/sanitize-$tool.txt 2>&1
  echo "sanitize $tool exit $?"; tail -2 $R/sanitize-$tool.txt
done
echo "== $E bench $C --suite anchors --dtype f16 --json bench.json" > $R/bench.txt
timeout 330 $E bench $C --suite anchors --dtype f16 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 4
cd $OUT && tar czf a.tgz a && rm -rf a
