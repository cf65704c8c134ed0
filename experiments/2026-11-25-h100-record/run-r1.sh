# Run R1: the anchors record timed alike (issue 17) and the export's timing condition
# (issue 19). `evo bench --champions` on the seven anchors rows, f16, with cold-L2 rows
# beside the graph/event ones, SDPA timed by the fixed scripts/sdpa_baseline.py (calls of
# 200 µs and more one at a time, as FAST times them); `evo export --cubin` of the same
# champions and scripts/export_check.py against this bench (each champion timed by its
# bench row's method, the back-to-back graph figure beside); the export and snapshot GPU
# tests; the register-cap fix on run M2's sample128 (same seed, --from 129), and a fresh
# 150-genome Ampere sample over every problem kind. Output: $OUT/r1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r1; mkdir -p $R
E=target/release/evo
I=$(ls -t target/release/deps/integration-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
echo "== $E bench --champions genomes/champions/h100 --cold-l2 --json bench.json" > $R/bench.txt
timeout 270 $E bench --champions genomes/champions/h100 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json > $R/bench_best.txt 2>&1; tail -12 $R/bench_best.txt
echo "== $E export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 120 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
tail -14 $R/export_check.txt; rm -rf $R/x
( INSTA_WORKSPACE_ROOT=$PWD CARGO_BIN_EXE_evo=$PWD/$E timeout 90 $I gpu_export gpu_snapshot --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu export+snapshot tests exit $?"; grep -E "^test |test result" $R/gpu-test.txt
echo "== EVO_PERSISTENT_GRID=7 $E gate --sample 150 --family ampere --seed 2865563562376472 --from 129 --suite default --time none" > $R/sample128.txt
EVO_PERSISTENT_GRID=7 timeout 40 $E gate --sample 150 --family ampere --seed 2865563562376472 --from 129 --suite default --time none >> $R/sample128.txt 2>&1; echo "sample128 exit $?"; tail -1 $R/sample128.txt
echo "== EVO_PERSISTENT_GRID=7 $E gate --sample 150 --family ampere --suite default --time none --json sample-ampere.json" > $R/sample-ampere.txt
EVO_PERSISTENT_GRID=7 timeout 120 $E gate --sample 150 --family ampere --suite default --time none --json $R/sample-ampere.json >> $R/sample-ampere.txt 2>&1; echo "sample ampere exit $?"; tail -1 $R/sample-ampere.txt
gzip -9 $R/sample-ampere.json
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
