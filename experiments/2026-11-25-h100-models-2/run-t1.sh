# Run T1: the gates' GPU tests (`just gpu-test`'s first line) after FAST's flush became a
# read pass, with the six new per-shape champions' GREEN snapshots written
# (INSTA_UPDATE=always; brought back in snapshots/). Needs target/record/gates-gpu-tests.gz
# (`cargo test -p evo-gates --features gpu --release --no-run`), built from the commit that
# adds this script. Output: $OUT/t1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/t1; mkdir -p $R/snapshots
gunzip -c target/record/gates-gpu-tests.gz > target/record/gates-gpu-tests && chmod +x target/record/gates-gpu-tests
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 480 target/record/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "^test |test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/
cd $OUT && tar czf t1.tgz t1 && rm -rf t1
