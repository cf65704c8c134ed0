# Run G5: the gates' GPU test set after its GREEN helper skips the head dims a source
# cannot be built at (run G4: it took the champions' D256 rule rejections and the
# first-ABI files' D96/D256 skips for compile failures), the champions' GREEN snapshots
# rewritten; the rest of run G2's Ampere sample (same seed, from the 77th).
# Output: $OUT/g5.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g5; mkdir -p $R/snapshots
E=target/record/evo
T=$(ls -t target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 200 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/
echo "== EVO_PERSISTENT_GRID=7 evo gate --sample 100 --family ampere --seed 6038688641988655 --from 77 --suite default --time none" > $R/sample-ampere.txt
EVO_PERSISTENT_GRID=7 timeout 150 $E gate --sample 100 --family ampere --seed 6038688641988655 --from 77 --suite default --time none >> $R/sample-ampere.txt 2>&1; echo "sample ampere exit $?"; tail -1 $R/sample-ampere.txt
cd $OUT && tar czf g5.tgz g5 && rm -rf g5
