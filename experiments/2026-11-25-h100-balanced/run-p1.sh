# Run P1: `evo profile` (Nsight Compute) of the two L1024 champions on the template with
# balanced query blocks: what holds the non-causal row at cuDNN. Needs target/record/evo.gz,
# built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-25-h100-balanced/run-p1.sh. Output: $OUT/p1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/p1; mkdir -p $R
E=target/record/evo
gunzip -c $E.gz > $E && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
for row in nc c; do
  g=b4-h16-l1024-d64; P=4,16,1024,1024,64,f16
  [ $row = c ] && { g=$g-causal; P=$P,causal; }
  echo "== evo profile genomes/champions/h100/$g.toml --problem $P --out profile-$g" > $R/profile-$g.txt
  timeout 90 $E profile genomes/champions/h100/$g.toml --problem $P --out $R/profile-$g >> $R/profile-$g.txt 2>&1
  echo "profile $g exit $?"; tail -22 $R/profile-$g.txt
done
cd $OUT && tar czf p1.tgz p1 && rm -rf p1
