#!/bin/bash
# Run D1: where the grouped decode row's bandwidth goes (B16 H32/8 Lq1 Lk8192 D128 causal-br).
# 1. bw_probe.cu (nvcc): K and V streamed by a TMA ring (CTAs, chunk, ring depth, an L2
#    evict-first hint) and by plain 16-byte loads, each after a read over the L2.
# 2. evo bench --cold-l2: the champion, its twin as a hand-written file (gen_twin.py, the
#    control), and twins with deeper rings than the genome allows, SDPA beside.
# 3. evo profile of the champion.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d1; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv; } > $R/info.txt 2>&1
nvcc -O3 -arch=sm_90a -o /tmp/bw_probe $X/bw_probe.cu > $R/probe.txt 2>&1 && timeout 200 /tmp/bw_probe >> $R/probe.txt 2>&1
echo "probe exit $?"
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins; mkdir -p $T
for v in "st4:EVO_STAGES=4" "st5:EVO_STAGES=5" "st6:EVO_STAGES=6" "bn32st8:EVO_BLOCK_N=32 EVO_STAGES=8" "bn128st3:EVO_BLOCK_N=128 EVO_STAGES=3"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
echo "== evo bench $C --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 240 $E bench $C $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
timeout 100 $E profile $C --problem $P --out /tmp/prof > $R/profile.txt 2>&1
echo "profile exit $?"
cp /tmp/prof/ncu.csv $R/ncu.csv 2>/dev/null; gzip -f $R/ncu.csv 2>/dev/null
sed 's/  */ /g' $R/probe.txt | cut -c1-110
python3 scripts/bench_best.py $R/bench.json --top 12
tail -25 $R/profile.txt | cut -c1-150
