# Run M6: the export's GPU tests after this session's changes (the second ABI, pack_gqa,
# evo_attention_forward_ex, the Python module's enable_gqa) and the snapshot command's:
# a C program runs a champion; the Python module runs, falls back and refuses a
# foreign CUBIN; `evo snapshot` records an export's outputs and `--check` passes them,
# and fails a perturbed snapshot naming the problem and row.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/m6; mkdir -p $R
I=$(ls -t target/release/deps/integration-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
( timeout 200 $I gpu_export gpu_snapshot --test-threads=1 --nocapture ) > $R/gpu-test.txt 2>&1
echo "gpu export+snapshot tests exit $?"; grep -E "^test |test result" $R/gpu-test.txt
cd $OUT && tar czf m6.tgz m6 && rm -rf m6
