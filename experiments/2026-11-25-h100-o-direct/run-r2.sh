#!/bin/bash
# Run R2: the record of run-r1.sh again, on the H100 (R1 ran on an H200: its record is
# kept in r1-h200/, its GPU checks in t1/). `evo bench --champions genomes/champions/h100
# --record --cold-l2`, f16, SDPA beside each, then bf16 without SDPA. Needs
# target/record/evo.xz (`cargo build --release`) built from the commit that adds this
# script. Usage: bash experiments/2026-11-25-h100-o-direct/run-r2.sh
# Output: $OUT/r2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-o-direct
R=$OUT/r2; mkdir -p $R/champions target/release
for f in evo; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 200 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
cp genomes/champions/h100/* $R/champions/
python3 scripts/bench_best.py $R/record.json --top 1 > $R/record_best.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json bf16.json" > $R/bf16.txt
timeout 80 $E bench --champions genomes/champions/h100 --dtype bf16 --no-sdpa --json $R/bf16.json >> $R/bf16.txt 2>&1; echo "bf16 exit $?"
cat $R/record_best.txt
grep champion $R/bf16.txt | cut -c1-120
gzip -9 -k $R/record.json; gzip -9 $R/bf16.json
cd $OUT && tar czf r2.tgz r2 && rm -rf r2; cd - > /dev/null
