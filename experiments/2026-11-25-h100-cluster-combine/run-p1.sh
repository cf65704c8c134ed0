#!/bin/bash
# Run P1: ncu of the seed champion, its cluster-merge twin (seed-c2) and the champion on
# B1 H16 Lq512 Lk256 (the twin's CTAs without the merge): where does the twin's time go?
mkdir -p target/release; gunzip -c target/record/evo.gz > target/release/evo; chmod +x target/release/evo
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
E=target/release/evo; X=experiments/2026-11-25-h100-cluster-combine; G=$X/genomes; R=$OUT/p1
mkdir -p $R; C=genomes/champions/h100
prof() { echo "== $E profile $1 --problem $2 --out $3" > $R/$3.txt; timeout 120 $E profile $1 --problem $2 --out $R/$3 >> $R/$3.txt 2>&1; }
prof $C/b1-h8-l512-d64.toml 1,8,512,512,64,f16 champion
prof $G/seed-c2.toml 1,8,512,512,64,f16 seed-c2
prof $C/b1-h8-l512-d64.toml 1,16,512,256,64,f16 champion-h16-lk256
prof $G/seed-c2.toml 1,8,512,512,64,f16,causal seed-c2-causal
for f in $R/*.txt; do grep -E "^(==|duration|occupancy|tensor|stall #1|grid)" $f; done
cd $OUT && tar czf p1.tgz p1 && rm -rf p1
