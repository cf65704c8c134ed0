#!/bin/bash
# Run S1: a search on each non-causal anchors row that E2 left near cuDNN (B2 H16 L4096 D128,
# B4 H16 L1024 D64) over the template with `o_store`: `evo evolve --backend gpu --problem
# SPEC --minutes M`, both families, fresh seed, seeded with the class's champion and this
# folder's twins of it (first, so that they are in generation 0), then the named genomes.
# After each: its champion (`evo champions`) and the class's recorded champion timed with
# SDPA beside them, cold L2 too.
# Needs target/record/evo.xz, built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-25-h100-o-direct/run-s1.sh L4096_MINUTES L1024_MINUTES
# Output: $OUT/s1.tgz (the two search folders and their benches).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-o-direct
R=$OUT/s1; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
for row in l4096 l1024; do
  if [ $row = l4096 ]; then minutes=$1; P=2,16,4096,4096,128,f16; cls=b2-h16-l4096-d128; twins="$X/genomes/l4096-d*.toml"
  else minutes=$2; P=4,16,1024,1024,64,f16; cls=b4-h16-l1024-d64; twins="$X/genomes/l1024-d128*.toml"; fi
  seeds=$R/seeds-$row; mkdir -p $seeds
  cp genomes/champions/h100/$cls.toml $seeds/0-$cls.toml
  for v in $twins; do cp $v $seeds/1-$(basename $v); done
  cp genomes/*.toml $seeds/
  echo "== evo evolve --backend gpu --problem $P --minutes $minutes --genomes seeds-$row --experiment search-$row --quiet" > $R/search-$row.txt
  timeout $(( ${minutes%.*} * 60 + 75 )) $E evolve --backend gpu --problem $P --minutes $minutes --genomes $seeds \
    --experiment $R/search-$row --quiet >> $R/search-$row.txt 2>&1; echo "search $row exit $?"
  tail -3 $R/search-$row.txt
  $E champions $R/search-$row --out $R/champion-$row > $R/champions-$row.txt 2>&1; echo "champions $row exit $?"
  sed -i "s/^name = .*/name = \"s1-$row-$cls\"/" $R/champion-$row/$cls.toml
  echo "== evo bench CHAMPION genomes/champions/h100/$cls.toml --problem $P --cold-l2 --json bench-$row.json" > $R/bench-$row.txt
  timeout 90 $E bench $R/champion-$row/$cls.toml genomes/champions/h100/$cls.toml --problem $P --cold-l2 --json $R/bench-$row.json >> $R/bench-$row.txt 2>&1
  echo "bench $row exit $?"
  python3 scripts/bench_best.py $R/bench-$row.json
  gzip -9 $R/search-$row/evaluations.jsonl $R/search-$row/lineage.json
done
cd $OUT && tar czf s1.tgz s1 && rm -rf s1
