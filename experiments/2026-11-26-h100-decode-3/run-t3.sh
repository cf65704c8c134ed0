#!/bin/bash
# Run T3 (after R3): `just gpu-test`'s two parts, the gates' GPU tests (the champions' GREEN
# snapshots rewritten with INSTA_UPDATE=always, in snapshots.tgz) and the export's (the C
# ABI, the Python package and snapshots through the runtime, whose launches now take O's
# tensor map for TMA-store kernels; the grouped decode champion now splits its warpgroups by keys). Needs target/record/{evo,libevo_runtime.so,integration,
# gates-gpu-tests}.xz (`cargo build --release`, `cargo build --release -p evo-runtime`,
# `cargo test --features gpu --test integration --release --no-run`,
# `cargo test -p evo-gates --features gpu --release --no-run`).
# Usage: bash experiments/2026-11-26-h100-decode-3/run-t3.sh
# Output: $OUT/t3 (the test logs).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
T=$OUT/t3; mkdir -p $T target/release
for f in evo libevo_runtime.so integration gates-gpu-tests; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $T/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 150 target/release/gates-gpu-tests gpu_tests --test-threads=1 ) > $T/gates-gpu-test.txt 2>&1
echo "gates gpu-test exit $?"; grep -E "test result" $T/gates-gpu-test.txt; grep -E "FAILED|panicked" -A3 $T/gates-gpu-test.txt | head -12
tar czf $T/snapshots.tgz crates/gates/src/snapshots/
( INSTA_WORKSPACE_ROOT=$PWD timeout 120 target/release/integration gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $T/export-gpu-test.txt 2>&1
echo "export gpu-test exit $?"; grep -E "^test |test result" $T/export-gpu-test.txt; grep -E "FAILED|panicked" -A4 $T/export-gpu-test.txt | head -16
