# Run S1: a search on each L1024 anchors row over the template with balanced query blocks
# (issue 17): `evo evolve --backend gpu --problem SPEC --minutes M`, both families, fresh
# seed, seeded with the class's champion and run B1's three-warpgroup variants (first, so
# that they are in generation 0), then the named genomes. After each: its champion
# (`evo champions`) and the class's recorded champion timed with SDPA beside them.
# Needs target/record/evo.gz, built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-25-h100-balanced/run-s1.sh NC_MINUTES C_MINUTES
# Output: $OUT/s1.tgz (the two search folders and their benches).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-balanced
R=$OUT/s1; mkdir -p $R
E=target/record/evo
gunzip -c $E.gz > $E && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
NC=4,16,1024,1024,64,f16
for row in nc c; do
  minutes=$1; P=$NC; cls=b4-h16-l1024-d64
  [ $row = c ] && { minutes=$2; P=$NC,causal; cls=$cls-causal; }
  seeds=$R/seeds-$row; mkdir -p $seeds
  cp genomes/champions/h100/$cls.toml $seeds/0-$cls.toml
  for v in $X/variants/*.toml; do cp $v $seeds/1-$(basename $v); done
  cp genomes/*.toml $seeds/
  echo "== evo evolve --backend gpu --problem $P --minutes $minutes --genomes seeds-$row --experiment search-$row --quiet" > $R/search-$row.txt
  timeout $(( ${minutes%.*} * 60 + 75 )) $E evolve --backend gpu --problem $P --minutes $minutes --genomes $seeds \
    --experiment $R/search-$row --quiet >> $R/search-$row.txt 2>&1; echo "search $row exit $?"
  tail -3 $R/search-$row.txt
  $E champions $R/search-$row --out $R/champion-$row > $R/champions-$row.txt 2>&1; echo "champions $row exit $?"
  sed -i "s/^name = .*/name = \"s1-$row-$cls\"/" $R/champion-$row/$cls.toml
  echo "== evo bench CHAMPION genomes/champions/h100/$cls.toml --problem $P --json bench-$row.json" > $R/bench-$row.txt
  timeout 90 $E bench $R/champion-$row/$cls.toml genomes/champions/h100/$cls.toml --problem $P --json $R/bench-$row.json >> $R/bench-$row.txt 2>&1
  echo "bench $row exit $?"
  python3 scripts/bench_best.py $R/bench-$row.json
  gzip -9 $R/search-$row/evaluations.jsonl $R/search-$row/lineage.json
done
cd $OUT && tar czf s1.tgz s1 && rm -rf s1
