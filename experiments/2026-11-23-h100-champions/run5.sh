set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
S=experiments/2026-11-23-h100-champions/searches

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/info.txt
# 1. the searches of the D128 shapes and B4 H16 L1024 had 50-120 evaluations: resume each (same experiment) for 50 s more
for slug in 2-16-4096-4096-128-f16 2-16-4096-4096-128-f16-causal 1-16-8192-8192-128-f16 4-16-1024-1024-64-f16; do
  echo "== $E evolve --experiment $S/$slug --minutes 0.85 --backend gpu --quiet (resumed)" | tee -a $R/resume.txt
  timeout 130 $E evolve --experiment $S/$slug --minutes 0.85 --backend gpu --quiet >> $R/resume.txt 2>&1; echo "exit $?" >> $R/resume.txt
done
grep -E "^==|^[0-9]+ evaluations|^champion" $R/resume.txt
# 2. champions from every per-shape search (plus the two seed-shape searches of the gate record)
G=experiments/2026-11-23-h100-gate-integrity/throughput
rm -rf genomes/champions
$E champions $S/* $G/after-fixes/experiment $G/after/experiment --out genomes/champions/h100 2>&1 | tee $R/champions.txt
# 3. the champions against SDPA and the cuBLAS hybrid, one run per dtype; f16 figures recorded in the table
$E bench --champions genomes/champions/h100 --record --json experiments/2026-11-23-h100-champions/bench_f16.json > $R/bench_f16.txt 2>&1; echo "bench f16 exit $?"
$E bench --champions genomes/champions/h100 --dtype bf16 --json experiments/2026-11-23-h100-champions/bench_bf16.json > $R/bench_bf16.txt 2>&1; echo "bench bf16 exit $?"
# 4. GPU tests: the set, then the per-shape champions' GREEN snapshots written
( export EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD; timeout 120 target/release/deps/evo_gates-<hash> gpu_tests --test-threads=1 --skip per_shape_champion > $R/gpu-test.txt 2>&1; echo "gpu-test exit $?"; INSTA_UPDATE=always timeout 90 target/release/deps/evo_gates-<hash> per_shape_champion --test-threads=1 > $R/gpu-test-champions.txt 2>&1; echo "champion snapshots exit $?" )
grep -E "test result|FAILED" $R/gpu-test*.txt
# 5. profiles of the champions of the shapes where cuDNN leads
for c in b4-h16-l1024-d64:4,16,1024,1024,64,f16 b2-h16-l4096-d128:2,16,4096,4096,128,f16; do
  n=${c%%:*}; p=${c#*:}
  timeout 100 $E profile genomes/champions/h100/$n.toml --problem $p --out experiments/2026-11-23-h100-champions/profile-$n > $R/profile-$n.txt 2>&1; echo "profile $n exit $?"
done
grep -E "^(champion|sdpa-cudnn) " $R/bench_f16.txt $R/bench_bf16.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar czf $OUT/repo.tgz genomes/champions experiments/2026-11-23-h100-champions crates/gates/src/snapshots
