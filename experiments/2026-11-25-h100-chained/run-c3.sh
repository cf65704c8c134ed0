# Run C3: C1-C2's chained kernels after the fix (O was read uninitialized at a chain's
# start; NVRTC then took the chain's first tile's rows for every store). GREEN with the
# persistent grid capped at 1, 2 and 3 CTAs (chains of many tiles) and uncapped, then
# C1's timing: the D64 twins on B4 H16 L1024 D64 (causal and not) and the D128 twins on
# B2 H16 L4096 D128, f16, SDPA beside them, graph replay and cold L2. Output: $OUT/c3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
R=$OUT/c3; mkdir -p $R
E=target/record/evo
G=experiments/2026-11-25-h100-chained/genomes
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
for n in 1 2 3 0; do
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  echo "== EVO_PERSISTENT_GRID=$n evo gate $G/*.toml --suite default --time none --seed $seed" > $R/green-grid$n.txt
  EVO_PERSISTENT_GRID=$n timeout 120 $E gate $G/*.toml --suite default --time none --seed $seed >> $R/green-grid$n.txt 2>&1; echo "grid $n green exit $?"
  grep -E "^FAIL|passed GREEN|failed:" $R/green-grid$n.txt | cut -c1-300 | head -6
done
D64=$(ls $G/l1024-*.toml $G/causal-*.toml)
echo "== evo bench $D64 --problem 4,16,1024,1024,64,f16 --problem 4,16,1024,1024,64,f16,causal --cold-l2 --json d64.json" > $R/d64.txt
timeout 240 $E bench $D64 --problem 4,16,1024,1024,64,f16 --problem 4,16,1024,1024,64,f16,causal --cold-l2 --json $R/d64.json >> $R/d64.txt 2>&1; echo "d64 bench exit $?"
echo "== evo bench $G/d128-on.toml $G/d128-chained.toml --problem 2,16,4096,4096,128,f16 --cold-l2 --json d128.json" > $R/d128.txt
timeout 90 $E bench $G/d128-on.toml $G/d128-chained.toml --problem 2,16,4096,4096,128,f16 --cold-l2 --json $R/d128.json >> $R/d128.txt 2>&1; echo "d128 bench exit $?"
grep -E "µs|failed" $R/d64.txt $R/d128.txt | grep -v "cublas\|not built" | sed 's/^.*txt://' | cut -c1-120
gzip -9 $R/*.json
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
