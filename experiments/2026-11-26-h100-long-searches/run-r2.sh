#!/bin/bash
# Run R2: the record after S5-S8 (new champions from S8: B1 H16/8 L4096 D256 causal and
# B1 H32 L4096 D96 causal, both with O stored from the registers), built with the TMA store
# in the template. (1) `evo bench --champions genomes/champions/h100 --record --cold-l2`,
# f16, SDPA beside each, then bf16 without SDPA; (2) GREEN with 8 drawn shapes on the two
# new champions; memcheck and racecheck on them over tests/sanitize/suite.toml.
# Needs target/record/evo.xz (`cargo build --release` at the commit that adds this script's
# champions). Usage: bash experiments/2026-11-26-h100-long-searches/run-r2.sh
# Output: $OUT/r2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r2; mkdir -p $R/champions $R/checks target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo
chmod +x target/release/evo
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 240 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
cp genomes/champions/h100/* $R/champions/
python3 scripts/bench_best.py $R/record.json --top 1 > $R/record_best.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json bf16.json" > $R/bf16.txt
timeout 90 $E bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json $R/bf16.json >> $R/bf16.txt 2>&1; echo "bf16 exit $?"
cat $R/record_best.txt
grep champion $R/bf16.txt | grep -v "not built" | cut -c1-120
gzip -9 -k $R/record.json; gzip -9 $R/bf16.json
C=genomes/champions/h100
P="$C/b1-h16kv8-l4096-d256-causal.toml $C/b1-h32-l4096-d96-causal.toml"
echo "== evo gate $P --time none --drawn 8 --seed 20261127" > $R/checks/green.txt
timeout 100 $E gate $P --time none --drawn 8 --seed 20261127 >> $R/checks/green.txt 2>&1; echo "green exit $?"; tail -2 $R/checks/green.txt
for tool in memcheck racecheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate $P --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/checks/$tool.log
  timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $P --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/checks/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kernels passed|kernels failed" $R/checks/$tool.log | tail -2
done
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
