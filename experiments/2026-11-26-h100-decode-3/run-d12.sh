#!/bin/bash
# Run D12: D11 found the decode champion 3% slower than its own no-math twin. Of a packed
# decode's 64 rows 4 are live; the template computed the other 60 as live ones (their
# exponentials, and P = 1 where S = 0 into P V). Twins from a copy of kernels/ with
# dead-rows.patch (dead rows: no exponentials, P = 0; softmax in attention_sm90_roles.cuh)
# against the champion, profiled (ncu, twice) and benched.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d12.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d12; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins12; mkdir -p $T
rm -rf /tmp/k12 && mkdir -p /tmp/k12 && cp -r kernels /tmp/k12/ && patch -s -d /tmp/k12 -p1 < $X/dead-rows.patch
export KERNELS=/tmp/k12/kernels
for v in "dead-st4:EVO_STAGES=4" "dead-st3:EVO_STAGES=3" "dead-st2:EVO_STAGES=2" "dead-ov0-st4:EVO_OVERLAP=0"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
for f in $C $T/*.cu; do
  src=$f; [ "${f%.cu}" != "$f" ] && src="--source $f"
  for r in 1 2; do
    timeout 100 $E profile $src --problem $P --out /tmp/prof12 > /tmp/p.txt 2>&1
    echo "$(basename $f) run $r: $(grep -E '^duration' /tmp/p.txt) $(grep -E '^DRAM' /tmp/p.txt) $(grep -E '^tensor' /tmp/p.txt)" | tee -a $R/profiles.txt
  done
done
echo "== evo bench $C --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 300 $E bench $C $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
grep -iE "mismatch|FAIL" $R/bench.txt | head -5
python3 scripts/bench_best.py $R/bench.json --top 8
