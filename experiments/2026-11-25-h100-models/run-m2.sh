# Run M2: after run M1 found three first-ABI adversarial kernels passing (the drawn
# shapes they fail on were now grouped or masked, and skipped for them), GREEN runs a
# case a kernel cannot state as its basic form. The gates' GPU test set again (the
# champions' GREEN snapshots rewritten, for review); GREEN over 150 sampled genomes of
# each family on the default suite (every new kind) with a fresh seed, persistent
# kernels on a grid of 7 CTAs.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/m2; mkdir -p $R/snapshots
E=target/release/evo
T=$(ls -t target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 200 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/ 2>/dev/null
for fam in hopper ampere; do
  echo "== EVO_PERSISTENT_GRID=7 $E gate --sample 150 --family $fam --suite default --time none --json sample-$fam.json" > $R/sample-$fam.txt
  EVO_PERSISTENT_GRID=7 timeout 170 $E gate --sample 150 --family $fam --suite default --time none --json $R/sample-$fam.json >> $R/sample-$fam.txt 2>&1
  echo "sample $fam exit $?"; tail -2 $R/sample-$fam.txt
done
cd $OUT && tar czf m2.tgz m2 && rm -rf m2
