#!/bin/bash
# Run D3: (1) bw_probe.cu 2d: the K/V ring loaded the way the Hopper template loads it (2D
# tensor map, 128-byte swizzle, one box per 64-column block) against 1D bulk copies of the
# same bytes; (2) the Ampere family on the grouped decode row (mma.sync over 16 packed rows,
# cp.async, two CTAs per SM): the twelve genomes in ampere/ against the champion, SDPA beside.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d3.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d3; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
nvcc -O3 -arch=sm_90a -o /tmp/bw_probe $X/bw_probe.cu -lcuda > $R/probe2d.txt 2>&1 && timeout 120 /tmp/bw_probe 2d >> $R/probe2d.txt 2>&1
echo "probe exit $?"
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
echo "== evo bench $C $X/ampere/*.toml --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 400 $E bench $C $X/ampere/*.toml --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
sed 's/  */ /g' $R/probe2d.txt | cut -c1-110
grep -iE "error|fail" $R/bench.txt | head
python3 scripts/bench_best.py $R/bench.json --top 14
