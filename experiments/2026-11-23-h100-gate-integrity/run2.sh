set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
export EVO=target/release/evo
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/info.txt
# 1. search throughput after the fixes (compile streamed beside the GPU, full-gate variants compiled only to crown)
( time EVO_LOG=evo_gates=debug,evo=debug $EVO evolve --backend gpu --strategy evolutionary --budget 200 --seed 1 --experiment $R/evolve/experiment --quiet ) > $R/evolve.txt 2>&1
echo "== evolve exit $?"; grep -E "^(200 evaluations|champion|  gates|real)" $R/evolve.txt
# 3. All-family sweep with the verified FAST on the seed shape
timeout 300 bash scripts/gate_sweep.sh $R/sweep-all 3 genomes/*.toml --sample 300 --suite default --time seed --seed 2027 --step-timeout 20 | tail -3
# 2. Hopper sweep: named + 300 sampled Hopper genomes, default suite + 6 drawn shapes
timeout 200 bash scripts/gate_sweep.sh $R/sweep-hopper 3 genomes/*.toml --sample 300 --family hopper --suite default --time none --seed 2026 --step-timeout 20 | tail -3
cd $OUT && tar czf r.tgz r && rm -rf r
