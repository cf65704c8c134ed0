# Run H: what holds the B4 H16 L1024 D64 row below cuDNN. `evo profile` (Nsight Compute)
# of the new champion there and of the previous one (persistent off), then one longer
# search of that shape seeded with the champions. Output: $OUT/h.tgz and s-*.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/h; mkdir -p $R
E=target/release/evo
X=experiments/2026-11-24-h100-champions-2
for g in genomes/champions/h100/b4-h16-l1024-d64.toml $X/candidates/l1k-previous.toml; do
  n=$(basename $g .toml)
  timeout 100 $E profile $g --problem 4,16,1024,1024,64,f16 --out $R/profile-$n > $R/profile-$n.txt 2>&1; echo "profile $n exit $?"
  tail -25 $R/profile-$n.txt
done
cd $OUT && tar czf h.tgz h && rm -rf h && cd - > /dev/null
bash $X/search.sh 4.5 4,16,1024,1024,64,f16
