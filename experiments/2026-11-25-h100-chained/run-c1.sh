# Run C1: chained overlap (softmax_overlap = "chained") against "on"/"off" twins.
# GREEN (default suite, fresh seed) on every genome of this folder; then, f16 with SDPA
# beside them, the D64 twins on B4 H16 L1024 D64 (causal and not) and the D128 twins on
# B2 H16 L4096 D128, each timed by FAST (graph replay) and on a cold L2.
# Needs target/record/evo built from the commit that adds this script.
# From the repository root: bash experiments/2026-11-25-h100-chained/run-c1.sh -> $OUT/c1.tgz
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
R=$OUT/c1; mkdir -p $R
E=target/record/evo
G=experiments/2026-11-25-h100-chained/genomes
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo "== evo gate $G/*.toml --suite default --time none --seed $seed" > $R/green.txt
timeout 240 $E gate $G/*.toml --suite default --time none --seed $seed >> $R/green.txt 2>&1; echo "green exit $?"
tail -3 $R/green.txt
D64=$(ls $G/l1024-*.toml $G/causal-*.toml)
echo "== evo bench $D64 --problem 4,16,1024,1024,64,f16 --problem 4,16,1024,1024,64,f16,causal --cold-l2 --json d64.json" > $R/d64.txt
timeout 240 $E bench $D64 --problem 4,16,1024,1024,64,f16 --problem 4,16,1024,1024,64,f16,causal --cold-l2 --json $R/d64.json >> $R/d64.txt 2>&1; echo "d64 bench exit $?"
echo "== evo bench $G/d128-on.toml $G/d128-chained.toml --problem 2,16,4096,4096,128,f16 --cold-l2 --json d128.json" > $R/d128.txt
timeout 90 $E bench $G/d128-on.toml $G/d128-chained.toml --problem 2,16,4096,4096,128,f16 --cold-l2 --json $R/d128.json >> $R/d128.txt 2>&1; echo "d128 bench exit $?"
grep -E "µs" $R/d64.txt $R/d128.txt | grep -v cublas | sed 's/^.*txt://' | cut -c1-150
gzip -9 $R/*.json
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
