# Run R1: the record of every class in genomes/champions/h100 (the seven anchors rows and
# the six models-suite rows of run S6), f16, SDPA beside each, warm and on a cold L2:
# `evo bench --champions genomes/champions/h100 --record --cold-l2`, which rewrites
# dispatch.toml and the champions' headers (brought back in champions/); then the same
# champions in bf16 without SDPA (issue 17: bf16 within 3% of f16). FAST and SDPA read
# L2 over before every timing (run D4). Output: $OUT/r1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r1; mkdir -p $R/champions
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 390 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
cp genomes/champions/h100/* $R/champions/
python3 scripts/bench_best.py $R/record.json --top 1 > $R/record_best.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json bf16.json" > $R/bf16.txt
timeout 150 $E bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json $R/bf16.json >> $R/bf16.txt 2>&1; echo "bf16 exit $?"
cat $R/record_best.txt
grep champion $R/bf16.txt | cut -c1-120
gzip -9 -k $R/record.json; gzip -9 $R/bf16.json
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
