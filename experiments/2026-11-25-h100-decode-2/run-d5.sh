# Run D5: does the grouped decode's time follow the SMs it occupies or the bytes it
# reads? The row's best kernel (one CTA per K/V head: 128 CTAs on 132 SMs) timed on the
# row and on the same per-head work over 132 K/V heads (B33 H16/4), and over 64 and 256
# (B8 H32/8, B32 H32/8), without SDPA. Output: $OUT/d5.txt.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
E=target/record/evo
K=experiments/2026-11-25-h100-models-2/seeds-decode/h-pack-c1-bn64-st2-s1.toml
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv;
  echo "== evo bench $K --problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 33,16,1,8192,128,f16,causal=br,kv=4 --problem 8,32,1,8192,128,f16,causal=br,kv=8 --problem 32,32,1,8192,128,f16,causal=br,kv=8 --no-sdpa"
  timeout 120 $E bench $K --problem 16,32,1,8192,128,f16,causal=br,kv=8 --problem 33,16,1,8192,128,f16,causal=br,kv=4 \
    --problem 8,32,1,8192,128,f16,causal=br,kv=8 --problem 32,32,1,8192,128,f16,causal=br,kv=8 --no-sdpa 2>&1; } > $OUT/d5.txt
grep "µs" $OUT/d5.txt | grep -v "^kernel"
