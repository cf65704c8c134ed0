# Run A: the GPU test set (device draws = host draws, device reference = candle on every
# row, the device row check = the CPU's, the hand-written kernels' verdicts, named
# genomes, hybrid, kept slots, snapshots) and `evo gate` over tests/kernels/*.cu with a
# fresh seed, judged by scripts/check_verdicts.py. Output under $OUT/r (tarred).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
T=$(ls target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=new timeout 330 $T gpu_tests --test-threads=1 --nocapture ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "^test |test result" $R/gpu-test.txt
mkdir -p $R/snapshots; cp crates/gates/src/snapshots/*.snap.new $R/snapshots/ 2>/dev/null
srcs=(); for f in tests/kernels/*.cu; do srcs+=(--source "$f"); done
echo "== $E gate ${srcs[*]} --suite default --time seed --json adversarial.json" > $R/adversarial.txt
timeout 200 $E gate "${srcs[@]}" --suite default --time seed --json $R/adversarial.json >> $R/adversarial.txt 2>&1
echo "gate exit $?"
python3 scripts/check_verdicts.py $R/adversarial.json > $R/verdicts.txt 2>&1; echo "check_verdicts exit $?"
cat $R/verdicts.txt | grep -v "^      "
cd $OUT && tar czf r.tgz r && rm -rf r
