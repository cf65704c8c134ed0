# Run G3: the GREEN report snapshots of the new per-shape champions (the gates' GPU
# test per_shape_champion_green_report_snapshots, fixed seed) written anew, then the
# whole GPU test set again against them. Output: $OUT/g3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g3; mkdir -p $R
T=target/release/deps/evo_gates-9214fa4e76180b5d
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 100 $T gpu_tests::per_shape_champion --test-threads=1 ) > $R/update.txt 2>&1
echo "update exit $?"
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=no timeout 150 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result|FAILED" $R/gpu-test.txt
cp crates/gates/src/snapshots/*champion_green_b*.snap $R/
cd $OUT && tar czf g3.tgz g3 && rm -rf g3
