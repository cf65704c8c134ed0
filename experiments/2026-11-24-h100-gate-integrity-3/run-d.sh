# Run D: `evo gate` over tests/kernels/*.cu with a fresh seed, judged by
# scripts/check_verdicts.py; the GPU test set (all snapshots written, INSTA_FORCE_PASS);
# compute-sanitizer racecheck over the GPU tests of the verifier's kernels (draws,
# reference, row comparison, gathers). Output under $OUT/r (tarred).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
T=$(ls target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
CS=/usr/local/cuda/bin/compute-sanitizer
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
srcs=(); for f in tests/kernels/*.cu; do srcs+=(--source "$f"); done
echo "== $E gate ${srcs[*]} --suite default --time seed --json adversarial.json" > $R/adversarial.txt
timeout 200 $E gate "${srcs[@]}" --suite default --time seed --json $R/adversarial.json >> $R/adversarial.txt 2>&1
echo "gate exit $?"
python3 scripts/check_verdicts.py $R/adversarial.json > $R/verdicts.txt 2>&1; echo "check_verdicts exit $?"
grep -v "^      " $R/verdicts.txt
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=new INSTA_FORCE_PASS=1 timeout 200 $T gpu_tests --test-threads=1 --nocapture ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "^test |test result" $R/gpu-test.txt
mkdir -p $R/snapshots; cp crates/gates/src/snapshots/*.snap.new $R/snapshots/ 2>/dev/null
( EVO_REPO=$PWD timeout 250 $CS --tool racecheck --racecheck-report all --error-exitcode 3 --print-limit 20 $T gpu_tests::the_device --test-threads=1 ) > $R/racecheck-verifier.txt 2>&1
echo "racecheck exit $?"; grep -E "RACECHECK SUMMARY|test result" $R/racecheck-verifier.txt
cd $OUT && tar czf r.tgz r && rm -rf r
