#!/bin/bash
# Run D9: D8's model says the decode row is held by how long the one consumer holds each
# stage; overlap "on" holds tile j's V until tile j+1's K has landed. Two CTAs per SM, split
# 2 merged in a 2-CTA cluster (D2's twins, which had overlap on), now with overlap off, and
# the one-CTA champion with overlap off, as hand-written twins (gen_twin.py), SDPA beside.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d9.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d9; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins; mkdir -p $T
CL="CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_OVERLAP=0"
for v in "c1-ov0-st4:EVO_OVERLAP=0" "c2-s2cl-ov0-bn32st4:$CL EVO_BLOCK_N=32 EVO_STAGES=4" \
  "c2-s2cl-ov0-bn32st2:$CL EVO_BLOCK_N=32 EVO_STAGES=2" "c2-s2cl-ov0-bn48st3:$CL EVO_BLOCK_N=48 EVO_STAGES=3" \
  "c2-s2cl-ov0-bn64st2:$CL EVO_STAGES=2" "c2-s2cl-ov1-bn32st4:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_BLOCK_N=32 EVO_STAGES=4"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
echo "== evo bench $C --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 400 $E bench $C $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
grep -iE "mismatch|FAIL" $R/bench.txt | head
python3 scripts/bench_best.py $R/bench.json --top 12
