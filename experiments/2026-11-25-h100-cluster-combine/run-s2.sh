# Run S2: a search on each seed-shape anchors row (B1 H8 L512 D64, causal and not) over
# the template with the cluster merge (`cluster_combine`): `evo evolve --backend gpu
# --problem SPEC --minutes M`, both families, fresh seed, seeded with the class's
# champion and this folder's seed-shape cluster genomes (first, so that they are in
# generation 0), then the named genomes. After each: its champion (`evo champions`) and
# the class's recorded champion timed with SDPA beside them.
# Needs target/record/evo.gz, built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-25-h100-cluster-combine/run-s2.sh NC_MINUTES C_MINUTES
# Output: $OUT/s2.tgz (the two search folders and their benches).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-cluster-combine
R=$OUT/s2; mkdir -p $R
E=target/record/evo
gunzip -c $E.gz > $E && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
NC=1,8,512,512,64,f16
for row in nc c; do
  minutes=$1; P=$NC; cls=b1-h8-l512-d64
  [ $row = c ] && { minutes=$2; P=$NC,causal; cls=$cls-causal; }
  seeds=$R/seeds-$row; mkdir -p $seeds
  cp genomes/champions/h100/$cls.toml $seeds/0-$cls.toml
  for v in $X/genomes/seed*.toml; do cp $v $seeds/1-$(basename $v); done
  cp genomes/*.toml $seeds/
  echo "== evo evolve --backend gpu --problem $P --minutes $minutes --genomes seeds-$row --experiment search-$row --quiet" > $R/search-$row.txt
  timeout $(( ${minutes%.*} * 60 + 75 )) $E evolve --backend gpu --problem $P --minutes $minutes --genomes $seeds \
    --experiment $R/search-$row --quiet >> $R/search-$row.txt 2>&1; echo "search $row exit $?"
  tail -3 $R/search-$row.txt
  $E champions $R/search-$row --out $R/champion-$row > $R/champions-$row.txt 2>&1; echo "champions $row exit $?"
  sed -i "s/^name = .*/name = \"s2-$row-$cls\"/" $R/champion-$row/$cls.toml
  echo "== evo bench CHAMPION genomes/champions/h100/$cls.toml --problem $P --json bench-$row.json" > $R/bench-$row.txt
  timeout 90 $E bench $R/champion-$row/$cls.toml genomes/champions/h100/$cls.toml --problem $P --json $R/bench-$row.json >> $R/bench-$row.txt 2>&1
  echo "bench $row exit $?"
  python3 scripts/bench_best.py $R/bench-$row.json
  gzip -9 $R/search-$row/evaluations.jsonl $R/search-$row/lineage.json
done
cd $OUT && tar czf s2.tgz s2 && rm -rf s2
