# Run S5: the gates' GPU test set alone (S4's stopped at its 170 s limit in the
# champions' GREEN snapshots, before it rewrote them), the champions' GREEN snapshots
# rewritten for the new causal L1024 champion (copied to s5/snapshots/).
# Needs target/record/gates-gpu-tests.gz, built from the commit that adds this script.
# Output: $OUT/s5.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/s5; mkdir -p $R/snapshots
[ -f target/record/gates-gpu-tests ] || { gunzip -c target/record/gates-gpu-tests.gz > target/record/gates-gpu-tests && chmod +x target/record/gates-gpu-tests; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 420 target/record/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/
cd $OUT && tar czf s5.tgz s5 && rm -rf s5
