# Run B2: why run B1's new build was slower. The L1024 champions (non-causal, three
# consumer warpgroups; causal, two) built from three versions of the Hopper template as
# hand-written kernels (sources/, written by `gen-sources.sh HEAD` at the commit before balanced blocks, with its changes in the work tree): `old` (the template before
# balanced blocks), `new` (balanced blocks, idle warpgroups skip their GEMMs), `noidle`
# (balanced blocks, the skip compiled out). Each is compiled by nvcc for sm_90a and its
# SASS counted (cuobjdump), and timed by `evo bench --source` with SDPA beside it, twice.
# Needs target/record/evo.gz (as run B1). Usage: bash experiments/2026-11-25-h100-balanced/run-b2.sh [NAME]
# Output: $OUT/NAME.tgz (NAME: b2 unless given).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
X=experiments/2026-11-25-h100-balanced
N=${1:-b2}
R=$OUT/$N; mkdir -p $R/sass
gunzip -c target/record/evo.gz > target/record/evo && chmod +x target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; nvcc --version | tail -2; } > $R/info.txt 2>&1
for f in $X/sources/*.cu; do
  n=$(basename $f .cu)
  nvcc -cubin -arch=sm_90a -O3 -DEVO_HEAD_DIM=64 -DEVO_BF16=0 -Xptxas -v -o $R/sass/$n.cubin $f > $R/sass/$n.log 2>&1
  cuobjdump -sass $R/sass/$n.cubin > $R/sass/$n.sass 2>&1
  printf "%-40s sass %6d  HGMMA %4d  WARPGROUP %4d  BAR %4d  LDL/STL %4d  COLLECTIVE %4d  warnings %d\n" $n \
    $(grep -c "^        /\*[0-9a-f]*\*/" $R/sass/$n.sass) $(grep -c "HGMMA" $R/sass/$n.sass) \
    $(grep -c "WARPGROUP" $R/sass/$n.sass) $(grep -cE " BAR\.| BAR " $R/sass/$n.sass) \
    $(grep -cE "LDL|STL" $R/sass/$n.sass) $(grep -c "COLLECTIVE" $R/sass/$n.sass) $(grep -ci "warn\|loss" $R/sass/$n.log)
done > $R/sass-summary.txt
rm -f $R/sass/*.cubin
NC=4,16,1024,1024,64,f16
for i in 1 2; do
  for p in nc c; do
    g=b4-h16-l1024-d64; P=$NC
    [ $p = c ] && { g=$g-causal; P=$NC,causal; }
    src=""; for v in old new noidle; do src="$src --source $X/sources/$v-$g.cu"; done
    [ $i = 2 ] && { src=""; for v in noidle new old; do src="$src --source $X/sources/$v-$g.cu"; done; }
    echo "== target/record/evo bench $src --problem $P --json $p-$i.json" > $R/$p-$i.txt
    timeout 150 target/record/evo bench $src --problem $P --json $R/$p-$i.json >> $R/$p-$i.txt 2>&1
    echo "$p-$i exit $?"
  done
done
for f in $R/*.json; do echo "## $(basename $f)"; python3 scripts/bench_best.py $f --top 3; done > $R/summary.txt 2>&1
cat $R/sass-summary.txt >> $R/summary.txt
cd $OUT && tar czf $N.tgz $N && rm -rf $N
tar xzf $OUT/$N.tgz -O $N/summary.txt
