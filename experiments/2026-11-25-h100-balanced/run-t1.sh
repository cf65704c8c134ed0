# Run T1: the GPU tests (`just gpu-test`) on the template with balanced query blocks and
# run S1's causal L1024 champion: the gates' GPU tests, with the champions' GREEN
# snapshots rewritten (INSTA_UPDATE=always; brought back in snapshots/, so that a change
# shows in the diff), then the export's (a C program and the Python module run
# champions; `evo snapshot` records and checks every class's output in f16 and bf16).
# Needs target/record/{evo,libevo_runtime.so,integration,gates-gpu-tests}.gz
# (`cargo build --release`, `cargo build --release -p evo-runtime`,
# `cargo test --features gpu --test integration --release --no-run`,
# `cargo test -p evo-gates --features gpu --release --no-run`), built from the commit
# that adds this script. Usage: bash experiments/2026-11-25-h100-balanced/run-t1.sh
# Output: $OUT/t1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/t1; mkdir -p $R/snapshots
mkdir -p target/release
for f in evo libevo_runtime.so integration gates-gpu-tests; do
  gunzip -c target/record/$f.gz > target/release/$f && chmod +x target/release/$f
done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 260 target/release/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gates-gpu-test.txt 2>&1
echo "gates gpu-test exit $?"; grep -E "test result" $R/gates-gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gates-gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/
( INSTA_WORKSPACE_ROOT=$PWD timeout 260 target/release/integration gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $R/export-gpu-test.txt 2>&1
echo "export gpu-test exit $?"; grep -E "^test |test result" $R/export-gpu-test.txt; grep -E "FAILED|panicked" -A4 $R/export-gpu-test.txt | head -16
cd $OUT && tar czf t1.tgz t1 && rm -rf t1
