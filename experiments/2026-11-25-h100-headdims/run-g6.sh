# Run G6: GREEN over 100 more sampled Hopper genomes on the default suite (every problem
# kind: grouped heads, bottom-right causal, windows, decode, D96 and D256 among the fixed
# cases and drawn shapes), fresh seed; with G1 (100 Hopper) and G2/G4/G5 (100 Ampere),
# 300 sampled genomes over every kind. Persistent kernels run on a grid of 7 CTAs.
# Needs target/record/evo or target/record/evo.gz, built from the commit that adds this
# script. Output: $OUT/g6.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g6; mkdir -p $R
[ -f target/record/evo ] || { gunzip -c target/record/evo.gz > target/record/evo && chmod +x target/record/evo; }
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== EVO_PERSISTENT_GRID=7 evo gate --sample 100 --family hopper --suite default --time none --json sample-hopper.json --save-samples samples" > $R/sample-hopper.txt
EVO_PERSISTENT_GRID=7 timeout ${G6_LIMIT:-200} $E gate --sample 100 --family hopper --suite default --time none \
  --json $R/sample-hopper.json --save-samples $R/samples >> $R/sample-hopper.txt 2>&1; echo "sample hopper exit $?"
grep -E "FAIL|error" $R/sample-hopper.txt | head -10; tail -1 $R/sample-hopper.txt
tar czf $R/samples.tgz -C $R samples && rm -rf $R/samples
gzip -9 $R/sample-hopper.json
cd $OUT && tar czf g6.tgz g6 && rm -rf g6
