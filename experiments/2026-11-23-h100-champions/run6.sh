set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
C=experiments/2026-11-23-h100-champions
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/info.txt
# the champions against SDPA (cuDNN, flash, efficient) and the cuBLAS hybrid, one run per dtype; f16 figures recorded in the table
$E bench --champions genomes/champions/h100 --record --json $C/bench_f16.json > $C/bench_f16.txt 2>&1; echo "bench f16 exit $?"
$E bench --champions genomes/champions/h100 --dtype bf16 --json $C/bench_bf16.json > $C/bench_bf16.txt 2>&1; echo "bench bf16 exit $?"
( export EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always; timeout 90 target/release/deps/evo_gates-<hash> per_shape_champion --test-threads=1 > $C/gpu-test-champion-snapshots.txt 2>&1; echo "champion snapshots exit $?" )
for c in b4-h16-l1024-d64:4,16,1024,1024,64,f16 b2-h16-l4096-d128:2,16,4096,4096,128,f16; do
  n=${c%%:*}; p=${c#*:}
  timeout 100 $E profile genomes/champions/h100/$n.toml --problem $p --out $C/profile-$n > $C/profile-$n.txt 2>&1; echo "profile $n exit $?"
done
grep -E "^(champion|sdpa-cudnn|sdpa-flash) " $C/bench_f16.txt $C/bench_bf16.txt
tar czf $OUT/repo.tgz genomes/champions $C crates/gates/src/snapshots
