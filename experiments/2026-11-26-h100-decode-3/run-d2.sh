#!/bin/bash
# Run D2: two CTAs per SM on the grouped decode row (B16 H32/8 Lq1 Lk8192 D128 causal-br).
# D1's probe streamed K and V at 3,070 GB/s from 256 CTAs (two per SM, 2 x 8 KB rings) and
# at most 3,040 from 128; the champion is one CTA per K/V head. Twins of the champion as
# hand-written files (gen_twin.py): split 2 over two CTAs per SM (launch bounds' minimum 2,
# the register split over half the file), merged by a 2-CTA cluster or by the combine
# kernel, 32/48/64-key tiles; GREEN on each, then evo bench --cold-l2 with SDPA beside.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d2.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d2; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins; mkdir -p $T
for v in "c2-s2cl-bn64st2:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_STAGES=2" \
  "c2-s2cl-bn32st4:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_BLOCK_N=32 EVO_STAGES=4" \
  "c2-s2cl-bn32st2:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_BLOCK_N=32 EVO_STAGES=2" \
  "c2-s2cl-bn48st3:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_BLOCK_N=48 EVO_STAGES=3" \
  "c2-s2-bn64st2:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_STAGES=2" \
  "c2-s2-bn32st4:CTAS_PER_SM=2 EVO_SPLIT_KV=2 EVO_BLOCK_N=32 EVO_STAGES=4" \
  "c1-s2cl-bn64st2:EVO_SPLIT_KV=2 EVO_CLUSTER_COMBINE=1 EVO_STAGES=2"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
echo "== evo gate --source TWIN (each)" > $R/green.txt
for f in $T/*.cu; do timeout 60 $E gate --source $f >> $R/green.txt 2>&1; echo "$f exit $?" >> $R/green.txt; done
grep -E "exit|PASS|FAIL|error" $R/green.txt | head -40
echo "== evo bench $C --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 300 $E bench $C $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
grep -iE "error|fail" $R/bench.txt | head
python3 scripts/bench_best.py $R/bench.json --top 12
