#!/bin/bash
# Run D11: is the decode champion's consumer what keeps it below a pure stream? Twins from
# a copy of kernels/ with diag-no-math.patch (EVO_DIAG_NO_MATH: every consumer warpgroup
# takes the no-rows path, waiting for and releasing each K/V stage with no GEMM and no
# softmax; O comes out zero), profiled one launch each with `evo profile` (ncu, twice),
# and timed by evo bench (which fails the no-math twins' outputs; their times still print).
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d11.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d11; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
$E compile $C --head-dim 128 --emit defines > /tmp/champ.defs
T=/tmp/twins11; mkdir -p $T
rm -rf /tmp/k11 && mkdir -p /tmp/k11 && cp -r kernels /tmp/k11/ && patch -s -d /tmp/k11 -p1 < $X/diag-no-math.patch
export KERNELS=/tmp/k11/kernels
for v in "math-st4:EVO_DIAG_NO_MATH=0" "nomath-st4:EVO_DIAG_NO_MATH=1" "nomath-st2:EVO_DIAG_NO_MATH=1 EVO_STAGES=2" \
  "math-ov0-st4:EVO_OVERLAP=0" "nomath-ov0-st4:EVO_DIAG_NO_MATH=1 EVO_OVERLAP=0"; do
  python3 $X/gen_twin.py /tmp/champ.defs $T/decode-${v%%:*}.cu ${v#*:}
done
for f in $T/*.cu; do
  for r in 1 2; do
    timeout 100 $E profile --source $f --problem $P --out /tmp/prof11 > /tmp/p.txt 2>&1
    echo "$(basename $f) run $r: $(grep -E '^duration' /tmp/p.txt) $(grep -E '^DRAM' /tmp/p.txt)" | tee -a $R/profiles.txt
  done
done
echo "== evo bench --source TWINS --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 300 $E bench $(for f in $T/*.cu; do echo --source $f; done) --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
python3 - $R/bench.json <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e.get("shape", "").startswith("B16") and (e.get("median_us") or e.get("verdict") != "pass"):
        print(e["kernel"][-40:], e.get("verdict"), e.get("median_us"), (e.get("reason") or "")[:80])
PY
