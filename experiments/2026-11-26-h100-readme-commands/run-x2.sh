#!/bin/bash
# Run X2: `just gpu-test`'s Rust parts: the gates' GPU tests (hand-written adversarial
# kernels with their verdicts, named genomes, the champions' GREEN snapshots, checked, not
# rewritten) and the export's (the C ABI, the Python package, export_check.py as the README
# gives it, snapshots through the runtime). Needs target/record/{evo,libevo_runtime.so,
# integration,gates-gpu-tests}.xz: `cargo build --release --workspace`, `cargo test
# --features gpu --test integration --release --no-run`, `cargo test -p evo-gates
# --features gpu --release --no-run` at the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-26-h100-readme-commands/run-x2.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/x2; mkdir -p $R target/release
for f in evo libevo_runtime.so integration gates-gpu-tests; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=no timeout 200 target/release/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gates-gpu-test.txt 2>&1
echo "gates gpu-test exit $?"; grep -E "test result" $R/gates-gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gates-gpu-test.txt | head -12
( INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=no PYTHONUNBUFFERED=1 timeout 370 target/release/integration gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $R/export-gpu-test.txt 2>&1
echo "export gpu-test exit $?"; grep -E "^test |test result" $R/export-gpu-test.txt; grep -E "FAILED|panicked" -A4 $R/export-gpu-test.txt | head -16
cd $OUT && tar czf x2.tgz x2 && rm -rf x2
