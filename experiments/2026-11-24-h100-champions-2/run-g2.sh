# Run G2: the gates after the launch moved into crates/runtime, and the export. The
# gates' GPU test set; `evo gate` over tests/kernels with a fresh seed and
# scripts/check_verdicts.py (issue 16's verdicts, now through the runtime's launcher);
# the export's GPU tests (a C program, the Python module); `evo export --cubin` of the
# recorded champions and scripts/export_check.py against this run's bench.
# Output: $OUT/g2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g2; mkdir -p $R
E=target/release/evo
T=target/release/deps/evo_gates-9214fa4e76180b5d
I=target/release/deps/integration-f9b155cd3a428cbf
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD timeout 150 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" $R/gpu-test.txt | head -5
srcs=(); for f in tests/kernels/*.cu; do srcs+=(--source "$f"); done
echo "== $E gate ${srcs[*]} --suite default --time seed --json adversarial.json" > $R/adversarial.txt
timeout 200 $E gate "${srcs[@]}" --suite default --time seed --json $R/adversarial.json >> $R/adversarial.txt 2>&1
echo "gate exit $?"; grep -m1 "seed" $R/adversarial.txt
python3 scripts/check_verdicts.py $R/adversarial.json > $R/verdicts.txt 2>&1; echo "check_verdicts exit $?"; tail -2 $R/verdicts.txt
( INSTA_WORKSPACE_ROOT=$PWD CARGO_BIN_EXE_evo=$PWD/$E timeout 120 $I gpu_export --test-threads=1 --nocapture ) > $R/gpu-export-test.txt 2>&1
echo "gpu_export exit $?"; grep -E "test result|FAILED|panicked" $R/gpu-export-test.txt | head -5
echo "== $E export X --champions genomes/champions/h100 --cubin" > $R/export.txt
$E export $R/x --champions genomes/champions/h100 --cubin >> $R/export.txt 2>&1; echo "export exit $?"
echo "== $E bench --champions genomes/champions/h100 --json bench.json" > $R/bench.txt
timeout 120 $E bench --champions genomes/champions/h100 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 150 python3 scripts/export_check.py $R/x --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
tail -12 $R/export_check.txt
rm -rf $R/x
cd $OUT && tar czf g2.tgz g2 && rm -rf g2
