# Run T3: T2's failing test again after its fix (run_champion.c asked for an uncovered
# head dim with D=96, which the D96 class now covers; it asks with D=80): the C program
# test, with T2's binaries (the test compiles the C source from the tree).
# Output: $OUT/t3.txt.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p target/release
for f in evo libevo_runtime.so integration; do gunzip -c target/record/$f.gz > target/release/$f && chmod +x target/release/$f; done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv;
  INSTA_WORKSPACE_ROOT=$PWD timeout 200 target/release/integration gpu_export --test-threads=1 --nocapture 2>&1; echo "exit $?"; } > $OUT/t3.txt
grep -E "^ok|^FAIL|test result|^exit" $OUT/t3.txt
