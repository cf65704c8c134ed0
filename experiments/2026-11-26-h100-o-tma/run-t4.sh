#!/bin/bash
# Run T4: six more twins of the grouped decode champion (B16 H32/8 Lq1 Lk8192 D128
# causal-br) against it and SDPA in one `evo bench --cold-l2`: two or four splits with the
# combine kernel (256 or 512 CTAs), 32- and 96-key tiles, no softmax overlap. Needs
# target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-o-tma/run-t4.sh
# Output: $OUT/t4 (bench text and JSON).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-o-tma
R=$OUT/t4; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml decode2/*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=8 --cold-l2 --json bench-decode2.json" > $R/bench-decode2.txt
timeout 150 $E bench genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml $X/decode2/*.toml \
  --problem 16,32,1,8192,128,f16,causal=br,kv=8 --cold-l2 --json $R/bench-decode2.json >> $R/bench-decode2.txt 2>&1
echo "bench exit $?"; python3 scripts/bench_best.py $R/bench-decode2.json --top 7
