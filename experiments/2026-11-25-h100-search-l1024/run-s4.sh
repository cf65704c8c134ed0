# Run S4: the record after S3's causal champion replaced the B4 H16 L1024 D64 causal one
# (genomes/champions/h100): `evo bench --champions genomes/champions/h100 --record
# --cold-l2` (f16, SDPA beside it), which rewrites dispatch.toml and the champions'
# headers (copied to s4/champions/); then the gates' GPU test set, the champions' GREEN
# snapshots rewritten (copied to s4/snapshots/).
# Needs target/record/evo.gz and target/record/gates-gpu-tests.gz (the gates' GPU test
# binary: `cargo test -p evo-gates --features gpu --release --no-run`), built from the
# commit that adds this script. Output: $OUT/s4.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/s4; mkdir -p $R/snapshots $R/champions
for b in evo gates-gpu-tests; do [ -f target/record/$b ] || { gunzip -c target/record/$b.gz > target/record/$b && chmod +x target/record/$b; }; done
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 200 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
cp genomes/champions/h100/* $R/champions/
python3 scripts/bench_best.py $R/record.json > $R/record_best.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 170 target/record/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/
gzip -9 $R/record.json
grep -E "ratio|champion|cudnn" $R/record.txt | grep -v cublas | tail -40 > $R/record-table.txt
cd $OUT && tar czf s4.tgz s4 && rm -rf s4
