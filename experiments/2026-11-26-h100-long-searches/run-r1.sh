#!/bin/bash
# Run R1: the record and the GPU checks after S1 and S2's champions (B2 H16 L4096 D128 causal:
# 128 x 192 direct store; B1 H16 L8192 D128: the persistent 128 x 192 direct-store kernel of
# the L4096 row). (1) `evo bench --champions genomes/champions/h100 --record --cold-l2`, f16,
# SDPA beside each, then bf16 without SDPA; (2) GREEN with 8 drawn shapes on the two new
# champions; memcheck and racecheck on them over tests/sanitize/suite.toml; (3) `just
# gpu-test`: the gates' GPU tests with the champions' GREEN snapshots rewritten
# (INSTA_UPDATE=always, in snapshots.tgz) and the export's. Needs
# target/record/{evo,libevo_runtime.so,integration,gates-gpu-tests}.xz (`cargo build --release`,
# `cargo build --release -p evo-runtime`, `cargo test --features gpu --test integration
# --release --no-run`, `cargo test -p evo-gates --features gpu --release --no-run`).
# Usage: bash experiments/2026-11-26-h100-long-searches/run-r1.sh
# Output: $OUT/r1.tgz and the test logs under $OUT/t1.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-long-searches
R=$OUT/r1; T=$OUT/t1; mkdir -p $R/champions $T target/release
for f in evo libevo_runtime.so integration gates-gpu-tests; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
cp $R/info.txt $T/info.txt
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 200 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
cp genomes/champions/h100/* $R/champions/
python3 scripts/bench_best.py $R/record.json --top 1 > $R/record_best.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json bf16.json" > $R/bf16.txt
timeout 80 $E bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json $R/bf16.json >> $R/bf16.txt 2>&1; echo "bf16 exit $?"
cat $R/record_best.txt
grep champion $R/bf16.txt | cut -c1-120
gzip -9 -k $R/record.json; gzip -9 $R/bf16.json
cd $OUT && tar czf r1.tgz r1 && rm -rf r1; cd - > /dev/null
C=genomes/champions/h100
P="$C/b2-h16-l4096-d128-causal.toml $C/b1-h16-l8192-d128.toml"
echo "== evo gate $P --time none --drawn 8 --seed 20261126" > $T/green.txt
timeout 100 $E gate $P --time none --drawn 8 --seed 20261126 >> $T/green.txt 2>&1; echo "green exit $?"; tail -2 $T/green.txt
S="$C/b2-h16-l4096-d128-causal.toml $C/b1-h16-l8192-d128.toml"
for tool in memcheck racecheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate $S --suite tests/sanitize/suite.toml --drawn 0 --time none" > $T/$tool.log
  timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $S --suite tests/sanitize/suite.toml --drawn 0 --time none >> $T/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kernels passed|kernels failed" $T/$tool.log | tail -2
done
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 120 target/release/gates-gpu-tests gpu_tests --test-threads=1 ) > $T/gates-gpu-test.txt 2>&1
echo "gates gpu-test exit $?"; grep -E "test result" $T/gates-gpu-test.txt; grep -E "FAILED|panicked" -A3 $T/gates-gpu-test.txt | head -12
tar czf $T/snapshots.tgz crates/gates/src/snapshots/
( INSTA_WORKSPACE_ROOT=$PWD timeout 100 target/release/integration gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $T/export-gpu-test.txt 2>&1
echo "export gpu-test exit $?"; grep -E "^test |test result" $T/export-gpu-test.txt; grep -E "FAILED|panicked" -A4 $T/export-gpu-test.txt | head -16
