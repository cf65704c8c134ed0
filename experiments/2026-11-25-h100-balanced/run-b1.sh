# Run B1: balanced query blocks (issue 17). The same genomes timed by the build before
# the change (target/record/evo-old) and after it (target/record/evo), alternately, each
# bench with PyTorch SDPA beside it; then the gates' GPU tests on the new build (GREEN
# snapshots compared, not rewritten: INSTA_UPDATE=new leaves any new output in .snap.new).
# Needs target/record/{evo,evo-old,gates-gpu-tests}.gz: `cargo build --release` at the
# commit before the one adding this script (evo-old) and at that commit (evo, and
# `cargo test -p evo-gates --features gpu --release --no-run`).
# Usage (repository root): bash experiments/2026-11-25-h100-balanced/run-b1.sh
# Output: $OUT/b1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-balanced
R=$OUT/b1; mkdir -p $R
for b in evo evo-old gates-gpu-tests; do
  gunzip -c target/record/$b.gz > target/record/$b && chmod +x target/record/$b
done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
NC=4,16,1024,1024,64,f16
C=$NC,causal
GNC="genomes/champions/h100/b4-h16-l1024-d64.toml $X/variants/wg3-bn64-s4.toml $X/variants/wg3-bn96-s3.toml $X/variants/wg3-bn128-s3.toml"
GC="genomes/champions/h100/b4-h16-l1024-d64-causal.toml $X/variants/wg3-bn128-s3-c.toml $X/variants/wg3-bn128-s2-c.toml"
run() {  # build tag problem genomes...
  local b=$1 tag=$2 p=$3; shift 3
  echo "== target/record/$b bench $* --problem $p --json $tag.json" > $R/$tag.txt
  timeout 150 target/record/$b bench "$@" --problem $p --json $R/$tag.json >> $R/$tag.txt 2>&1
  echo "$tag exit $?"
}
for i in 1 2; do
  run evo-old nc-old-$i $NC $GNC
  run evo nc-new-$i $NC $GNC
done
run evo-old c-old $C $GC
run evo c-new $C $GC
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=new timeout 240 target/record/gates-gpu-tests gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"
mkdir -p $R/snap-new; find crates tests -name "*.snap.new" -exec cp {} $R/snap-new/ \; 2>/dev/null
grep -E "^test |test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
for f in $R/nc-*.json $R/c-*.json; do echo "## $(basename $f)"; python3 scripts/bench_best.py $f --top 4; done > $R/summary.txt 2>&1
cd $OUT && tar czf b1.tgz b1 && rm -rf b1
tar xzf $OUT/b1.tgz -O b1/summary.txt
