# Run Z: the final commit's binaries (after the cold-L2 timing was folded into one
# helper): the gates' GPU test set, issue 16's verdicts with a fresh seed, and the seed
# shape's champions benched with --cold-l2. Output: $OUT/z.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/z; mkdir -p $R
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=no timeout 150 target/release/deps/evo_gates-0a46efc1dd7559f3 gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt
srcs=(); for f in tests/kernels/*.cu; do srcs+=(--source "$f"); done
timeout 200 $E gate "${srcs[@]}" --suite default --time seed --json $R/adversarial.json > $R/adversarial.txt 2>&1
python3 scripts/check_verdicts.py $R/adversarial.json > $R/verdicts.txt 2>&1; echo "check_verdicts exit $?"; grep -c "^ok" $R/verdicts.txt
timeout 150 $E bench genomes/champions/h100/b1-h8-l512-d64.toml genomes/champions/h100/b1-h8-l512-d64-causal.toml --suite seed --cold-l2 --json $R/bench.json > $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 2
gzip -9 $R/adversarial.json
cd $OUT && tar czf z.tgz z && rm -rf z
