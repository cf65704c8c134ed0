#!/bin/bash
# Run D13: D8's probe says a stream whose stages are held ~0.6 us each by one consumer loses
# ~2% and gets it back when two consumers take the tiles in turn (cuDNN's decode kernel
# splits its 4 warps along the keys). Twins from a copy of kernels/ with wg-keys.patch
# (EVO_WG_KEYS: two or three consumer warpgroups on the same 64 rows, warpgroup c computing
# the tiles it % warpgroups == c with its own softmax and O, merged in shared memory at the
# end; overlap off), against the champion, profiled (ncu, twice) and benched (FAST checks
# every timed launch row by row).
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d13.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d13; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins13; mkdir -p $T
rm -rf /tmp/k13 && mkdir -p /tmp/k13 && cp -r kernels /tmp/k13/ && patch -s -d /tmp/k13 -p1 < $X/wg-keys.patch
export KERNELS=/tmp/k13/kernels
for v in "k2-st4:EVO_WG_KEYS=1 EVO_CONSUMER_WGS=2 EVO_OVERLAP=0" "k2-st3:EVO_WG_KEYS=1 EVO_CONSUMER_WGS=2 EVO_OVERLAP=0 EVO_STAGES=3" \
  "k2-st2:EVO_WG_KEYS=1 EVO_CONSUMER_WGS=2 EVO_OVERLAP=0 EVO_STAGES=2" "k3-st3:EVO_WG_KEYS=1 EVO_CONSUMER_WGS=3 EVO_OVERLAP=0 EVO_STAGES=3" \
  "k3-st4:EVO_WG_KEYS=1 EVO_CONSUMER_WGS=3 EVO_OVERLAP=0" "k2-bn128-st2:EVO_WG_KEYS=1 EVO_CONSUMER_WGS=2 EVO_OVERLAP=0 EVO_BLOCK_N=128 EVO_STAGES=2"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
for f in $C $T/*.cu; do
  src=$f; [ "${f%.cu}" != "$f" ] && src="--source $f"
  for r in 1 2; do
    timeout 100 $E profile $src --problem $P --out /tmp/prof13 > /tmp/p.txt 2>&1
    echo "$(basename $f) run $r: $(grep -E '^duration' /tmp/p.txt) $(grep -E '^DRAM' /tmp/p.txt) $(grep -E '^tensor' /tmp/p.txt)" | tee -a $R/profiles.txt
  done
done
echo "== evo bench $C --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 300 $E bench $C $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
grep -iE "mismatch|FAIL" $R/bench.txt | head -5
python3 scripts/bench_best.py $R/bench.json --top 8
