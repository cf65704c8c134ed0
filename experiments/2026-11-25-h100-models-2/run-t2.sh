# Run T2: the export's GPU tests (`just gpu-test`'s last two lines: a C program runs a
# champion; the Python module runs champions, now also grouped, D96 and D256 ones
# through forward_ex, and falls back; `evo snapshot` records and checks every class's
# output in f16 and bf16) with the 13 classes of run S6's table; then the two decode
# rows once more, champions and SDPA, for the run-to-run spread against R1.
# Needs target/record/{evo,libevo_runtime.so,integration}.gz (`cargo build --release`,
# `cargo test --features gpu --test integration --release --no-run`), built from the
# commit that adds this script. Output: $OUT/t2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/t2; mkdir -p $R
mkdir -p target/release
for f in evo libevo_runtime.so integration; do gunzip -c target/record/$f.gz > target/release/$f && chmod +x target/release/$f; done
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( INSTA_WORKSPACE_ROOT=$PWD timeout 300 target/release/integration gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $R/gpu-test.txt 2>&1
echo "gpu export+snapshot tests exit $?"; grep -E "^test |test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A4 $R/gpu-test.txt | head -16
C=genomes/champions/h100
P="--problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=1"
echo "== evo bench $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml $C/b16-h32kv1-lq1-lk8192-d128-causal-br.toml $P --cold-l2 --json decode.json" > $R/decode.txt
timeout 150 $E bench $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml $C/b16-h32kv1-lq1-lk8192-d128-causal-br.toml $P --cold-l2 --json $R/decode.json >> $R/decode.txt 2>&1; echo "decode exit $?"
python3 scripts/bench_best.py $R/decode.json --top 2 > $R/decode_best.txt 2>&1; cat $R/decode_best.txt
gzip -9 $R/decode.json
cd $OUT && tar czf t2.tgz t2 && rm -rf t2
