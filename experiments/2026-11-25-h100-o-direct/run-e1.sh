#!/bin/bash
# Run E1: GREEN on the o_store = "direct" twins of the D128/D64 champions, then each
# anchors row (not the seed rows, whose champions merge in a cluster) with its champion and
# twins, SDPA in the same run, cold L2 beside graph replay.
mkdir -p target/release; python3 -c "import lzma,sys;open('target/release/evo','wb').write(lzma.open('target/record/evo.xz').read())"; chmod +x target/release/evo
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
E=target/release/evo; X=experiments/2026-11-25-h100-o-direct; G=$X/genomes; C=genomes/champions/h100; R=$OUT/e1
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/info.txt
echo "== $E gate $G/*.toml --time none --seed 20261128 --json green.json" > $R/green.txt
timeout 150 $E gate $G/*.toml --time none --seed 20261128 --json $R/green.json >> $R/green.txt 2>&1; echo "gate exit $?" >> $R/green.txt
bench() { # name timeout problem... -- genomes...
  local n=$1 t=$2; shift 2; local ps=(); while [ "$1" != "--" ]; do ps+=(--problem "$1"); shift; done; shift
  echo "== $E bench $* ${ps[*]} --cold-l2 --json bench-$n.json" >> $R/bench.txt
  timeout $t $E bench "$@" "${ps[@]}" --cold-l2 --json $R/bench-$n.json >> $R/bench.txt 2>&1; echo "bench exit $?" >> $R/bench.txt; }
bench l4096 120 2,16,4096,4096,128,f16 -- $C/b2-h16-l4096-d128.toml $G/l4096-d*.toml
bench l8192 120 1,16,8192,8192,128,f16 -- $C/b1-h16-l8192-d128.toml $G/l8192-d176.toml $G/l4096-d176.toml $G/l4096-d176-p24.toml
bench l4096c 100 2,16,4096,4096,128,f16,causal -- $C/b2-h16-l4096-d128-causal.toml $G/l4096c-*.toml
bench l1024 100 4,16,1024,1024,64,f16 4,16,1024,1024,64,f16,causal -- $C/b4-h16-l1024-d64.toml $C/b4-h16-l1024-d64-causal.toml $G/l1024*.toml
tail -3 $R/green.txt; grep -E "^(B|champion|l[0-9]|sdpa-cudnn) " $R/bench.txt | cut -c1-120
