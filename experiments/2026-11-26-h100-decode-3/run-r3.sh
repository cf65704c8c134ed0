#!/bin/bash
# Run R3: the record with S2's grouped decode champion (two consumer warpgroups split by
# keys, two stages) in genomes/champions/h100. (1) `evo bench --champions genomes/champions/h100
# --record --cold-l2`, f16, SDPA beside each, then bf16 without SDPA; (2) GREEN with 8 drawn
# shapes and a fresh seed on the named genomes (the rows template after this commit's
# changes) and the new champion; memcheck and racecheck on the new champion.
# Needs target/record/evo.xz (`cargo build --release` at the commit that adds this script).
# Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-r3.sh
# Output: $OUT/r3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r3; mkdir -p $R/champions $R/checks target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo
chmod +x target/release/evo
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 280 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
cp genomes/champions/h100/* $R/champions/
python3 scripts/bench_best.py $R/record.json --top 1 > $R/record_best.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json bf16.json" > $R/bf16.txt
timeout 90 $E bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json $R/bf16.json >> $R/bf16.txt 2>&1; echo "bf16 exit $?"
cat $R/record_best.txt
gzip -9 -k $R/record.json; gzip -9 $R/bf16.json
N=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
seed=$(date +%s%N | cut -c1-16)
echo "== evo gate genomes/*.toml $N --time none --drawn 8 --seed $seed" > $R/checks/green.txt
timeout 100 $E gate genomes/*.toml $N --time none --drawn 8 --seed $seed >> $R/checks/green.txt 2>&1; echo "green exit $?"; tail -2 $R/checks/green.txt
for tool in memcheck racecheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate $N --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/checks/$tool.log
  timeout 50 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $N --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/checks/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kernels passed|kernels failed" $R/checks/$tool.log | tail -2
done
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
