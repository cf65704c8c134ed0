#!/bin/bash
# Run D14: wg_split = "keys" (this commit's template and genome): GREEN (default suite, 8
# drawn shapes, a fresh seed) over the seven named decode twins in genomes/ and the 150 of
# sample150/ (draw_keys.py 150 sample150), then the named twins against the champion on the
# grouped decode row with SDPA beside (evo bench --cold-l2). Needs target/record/evo.xz
# built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d14.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d14; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
seed=$(date +%s%N | cut -c1-16)
echo "== evo gate genomes/*.toml sample150/*.toml --time none --drawn 8 --seed $seed --json green.json" > $R/green.txt
timeout 330 $E gate $X/genomes/*.toml $X/sample150/*.toml --time none --drawn 8 --seed $seed --json $R/green.json >> $R/green.txt 2>&1
echo "green exit $?"; grep -E "kernels passed|kernels failed|FAIL" $R/green.txt | head -8
gzip -9 $R/green.json
C=genomes/champions/h100/b16-h32kv8-lq1-lk8192-d128-causal-br.toml
P=16,32,1,8192,128,f16,causal=br,kv=8
echo "== evo bench $C genomes/*.toml --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 200 $E bench $C $X/genomes/*.toml --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 10
