# Run E: `evo gate` over tests/kernels/*.cu with a fresh seed, judged by
# scripts/check_verdicts.py (the run the issue names); the GPU test set; and the gates
# as they were before this change (target/evo-before, main at 226bc3e) on the kernels
# written for this change, seed 2026 as its default was. Output under $OUT/r (tarred).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
T=$(ls target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
srcs=(); for f in tests/kernels/*.cu; do srcs+=(--source "$f"); done
echo "== $E gate ${srcs[*]} --suite default --time seed --json adversarial.json" > $R/adversarial.txt
timeout 200 $E gate "${srcs[@]}" --suite default --time seed --json $R/adversarial.json >> $R/adversarial.txt 2>&1
echo "gate exit $?"
python3 scripts/check_verdicts.py $R/adversarial.json > $R/verdicts.txt 2>&1; echo "check_verdicts exit $?"
grep -v "^      " $R/verdicts.txt
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD timeout 200 $T gpu_tests --test-threads=1 --nocapture ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "^test |test result" $R/gpu-test.txt
new=(); for k in memo_content memo_content_twin batch_sets skip_repeats guard_scratch scribble_inputs sparse_rows fixed_draw_only naive; do new+=(--source tests/kernels/$k.cu); done
echo "== target/evo-before gate ${new[*]} --suite default --time seed --seed 2026 --json before.json" > $R/before.txt
timeout 150 target/evo-before gate "${new[@]}" --suite default --time seed --seed 2026 --json $R/before.json >> $R/before.txt 2>&1
echo "before exit $?"; grep -E "^\[" $R/before.txt
cd $OUT && tar czf r.tgz r && rm -rf r
