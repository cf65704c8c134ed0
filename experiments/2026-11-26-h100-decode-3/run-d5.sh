#!/bin/bash
# Run D5: the champion's K/V tiles visited as 2 or 4 interleaved streams (EVO_KV_STREAMS,
# KvRange::tile: kv-streams.patch, applied to a copy of kernels/), as hand-written twins
# (gen_twin.py),
# against the champion, SDPA beside; evo bench --cold-l2 verifies every timed launch.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d5.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d5; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins; mkdir -p $T
rm -rf /tmp/k5 && mkdir -p /tmp/k5 && cp -r kernels /tmp/k5/ && patch -s -d /tmp/k5 -p1 < $X/kv-streams.patch
export KERNELS=/tmp/k5/kernels
for v in "w1-st4:EVO_KV_STREAMS=1" "w2-st4:EVO_KV_STREAMS=2" "w4-st4:EVO_KV_STREAMS=4" \
  "w2-st2:EVO_KV_STREAMS=2 EVO_STAGES=2" "w2-st3:EVO_KV_STREAMS=2 EVO_STAGES=3" \
  "w4-st3:EVO_KV_STREAMS=4 EVO_STAGES=3" "w2-bn128st2:EVO_KV_STREAMS=2 EVO_BLOCK_N=128 EVO_STAGES=2" \
  "w2-bn32st4:EVO_KV_STREAMS=2 EVO_BLOCK_N=32 EVO_STAGES=4"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
echo "== evo bench $C --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 400 $E bench $C $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
grep -iE "error|fail|mismatch" $R/bench.txt | head
python3 scripts/bench_best.py $R/bench.json --top 12
