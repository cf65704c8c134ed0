set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
E=target/release/evo
P=experiments/2026-11-23-h100-hopper/seed-shape-profiles
mkdir -p $P
for g in fa2 fa3; do for c in "" ",causal"; do
  n=$g$( [ -n "$c" ] && echo -causal )
  timeout 100 $E profile genomes/$g.toml --problem 1,8,512,512,64,f16$c --out $P/$n > $P/$n.txt 2>&1; echo "$n exit $?"
done; done
grep -hE "^(fa2|fa3) on|grid|duration|occupancy|tensor pipe|SM throughput|stall #1" $P/*.txt
tar czf $OUT/p.tgz $P
