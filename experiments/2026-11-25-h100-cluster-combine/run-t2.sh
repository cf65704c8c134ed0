#!/bin/bash
# Run T2: the cluster merge on persistent grids, and the GPU tests. GREEN (default suite
# and 8 drawn shapes; each case's second launch of a persistent kernel runs on 1 to 3
# CTAs, which the host rounds to whole clusters) on this folder's persistent twins;
# memcheck on the three-warpgroup one (idle warpgroups, several tiles a CTA) over
# tests/sanitize/suite.toml; then `just gpu-test`: the gates' GPU tests with the
# champions' GREEN snapshots rewritten (INSTA_UPDATE=always, brought back in
# snapshots.tgz) and the export's (C program, Python module, `evo snapshot` of every
# class). Needs target/record/{evo,libevo_runtime.so,integration,gates-gpu-tests}.xz
# (`cargo build --release`, `cargo build --release -p evo-runtime`,
# `cargo test --features gpu --test integration --release --no-run`,
# `cargo test -p evo-gates --features gpu --release --no-run`), built from the commit
# that adds this script. Usage: bash experiments/2026-11-25-h100-cluster-combine/run-t2.sh
# Output: files under $OUT/t2.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-cluster-combine
R=$OUT/t2; mkdir -p $R target/release
for f in evo libevo_runtime.so integration gates-gpu-tests; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
P="$X/genomes/seed-c2-p1.toml $X/genomes/seed-c2-p3.toml $X/genomes/seedc-c2-p.toml $X/genomes/mqa-c4-p.toml $X/genomes/fa3-c4-p.toml"
echo "== evo gate $P --time none --seed 20261128" > $R/green.txt
timeout 90 $E gate $P --time none --seed 20261128 >> $R/green.txt 2>&1; echo "green exit $?"; tail -2 $R/green.txt
echo "== compute-sanitizer --tool memcheck evo gate $X/genomes/seed-c2-p3.toml --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/memcheck.log
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 --print-limit 20 \
  $E gate $X/genomes/seed-c2-p3.toml --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/memcheck.log 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|kernels passed|kernels failed" $R/memcheck.log | tail -2
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 150 target/release/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gates-gpu-test.txt 2>&1
echo "gates gpu-test exit $?"; grep -E "test result" $R/gates-gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gates-gpu-test.txt | head -12
tar czf $R/snapshots.tgz crates/gates/src/snapshots/
( INSTA_WORKSPACE_ROOT=$PWD timeout 120 target/release/integration gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $R/export-gpu-test.txt 2>&1
echo "export gpu-test exit $?"; grep -E "^test |test result" $R/export-gpu-test.txt; grep -E "FAILED|panicked" -A4 $R/export-gpu-test.txt | head -16
