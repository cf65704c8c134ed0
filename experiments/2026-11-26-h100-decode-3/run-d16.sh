#!/bin/bash
# Run D16: split by keys, which tiles each warpgroup takes: in turn (target/record/evo-alt.xz,
# a build of the commit that adds this script: tile p to warpgroup p % warpgroups) or a
# contiguous part of the range each (target/record/evo.xz, the same commit built with
# keys-contiguous.patch applied: KvRange::tile; the template is compiled into the binary),
# so the copy engine reads two streams per CTA (D4's probe: 128 CTAs x 2 streams 3,042
# GB/s against 2,996 from one). Alternating A/B benches without SDPA, then the contiguous
# build's with SDPA. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d16.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d16; mkdir -p $R
for b in evo evo-alt; do
  python3 -c "import lzma;open('target/record/$b','wb').write(lzma.open('target/record/$b.xz').read())" && chmod +x target/record/$b
done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
G="$C $X/genomes/decode-keys2-st2.toml $X/genomes/s2-champion.toml $X/genomes/decode-keys2-st4.toml"
for round in 1 2; do
  for b in evo-alt evo; do
    echo "== $b bench CHAMPION keys2-st2 s2-champion keys2-st4 --problem $P --no-sdpa --cold-l2 --json bench-$b-$round.json" > $R/bench-$b-$round.txt
    timeout 100 target/record/$b bench $G --problem $P --no-sdpa --cold-l2 --json $R/bench-$b-$round.json >> $R/bench-$b-$round.txt 2>&1
    echo "$b round $round exit $?"; grep -E "µs" $R/bench-$b-$round.txt | sed 's/  */ /g' | cut -c1-120
  done
done
echo "== evo bench ... --problem $P --cold-l2 --json bench-sdpa.json" > $R/bench-sdpa.txt
timeout 150 target/record/evo bench $G --problem $P --cold-l2 --json $R/bench-sdpa.json >> $R/bench-sdpa.txt 2>&1
echo "sdpa bench exit $?"
python3 scripts/bench_best.py $R/bench-sdpa.json --top 6
