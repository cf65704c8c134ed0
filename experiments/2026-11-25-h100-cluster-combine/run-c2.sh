#!/bin/bash
# Run C2: GREEN on the cluster-merge genomes (exchange padded: one CTA per SM), then the seed shape and the MQA decode
# row with and without the cluster merge, SDPA in the same run.
mkdir -p target/release; gunzip -c target/record/evo.gz > target/release/evo; chmod +x target/release/evo
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
E=target/release/evo; X=experiments/2026-11-25-h100-cluster-combine; G=$X/genomes; R=$OUT/c2
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/info.txt
echo "== $E gate $G/*.toml --time none --seed 20261126 --json green.json" > $R/green.txt
timeout 200 $E gate $G/*.toml --time none --seed 20261126 --json $R/green.json >> $R/green.txt 2>&1; echo "gate exit $?" >> $R/green.txt
C=genomes/champions/h100
echo "== $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml $G/seed*.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --cold-l2 --json bench-seed.json" > $R/bench-seed.txt
timeout 200 $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml $G/seed*.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --cold-l2 --json $R/bench-seed.json >> $R/bench-seed.txt 2>&1
echo "== $E bench $C/b16-h32kv1-lq1-lk8192-d128-causal-br.toml $G/mqa-*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=1 --cold-l2 --json bench-mqa.json" > $R/bench-mqa.txt
timeout 150 $E bench $C/b16-h32kv1-lq1-lk8192-d128-causal-br.toml $G/mqa-*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=1 --cold-l2 --json $R/bench-mqa.json >> $R/bench-mqa.txt 2>&1
tail -3 $R/green.txt; grep -E "^(B|champion|seed|mqa|sdpa-cudnn|sdpa-flash) " $R/bench-seed.txt $R/bench-mqa.txt | cut -c1-110
