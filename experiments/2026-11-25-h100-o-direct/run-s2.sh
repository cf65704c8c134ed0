#!/bin/bash
# Run S2: S1's L1024 search (B4 H16 L1024 D64, the row R2 put nearest cuDNN: 1.008x) resumed
# for MINUTES more (`evo evolve --experiment search-l1024`, which replays S1's evaluations
# from evaluations.jsonl and goes on); its champion timed against the recorded one with
# SDPA beside them, cold L2 too. Only if the new one is faster (warm and cold) does it
# replace the class's and the record run again (run-r2.sh's commands).
# Needs target/record/evo.xz built from the commit that adds this script.
# Usage: bash experiments/2026-11-25-h100-o-direct/run-s2.sh MINUTES. Output: $OUT/s2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-o-direct
R=$OUT/s2; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
P=4,16,1024,1024,64,f16; cls=b4-h16-l1024-d64
cp -r $X/s1/search-l1024 $R/search-l1024
gunzip $R/search-l1024/evaluations.jsonl.gz $R/search-l1024/lineage.json.gz
echo "== evo evolve --backend gpu --problem $P --minutes $1 --genomes s1/seeds-l1024 --experiment search-l1024 --quiet" > $R/search.txt
timeout $(( ${1%.*} * 60 + 75 )) $E evolve --backend gpu --problem $P --minutes $1 --genomes $X/s1/seeds-l1024 \
  --experiment $R/search-l1024 --quiet >> $R/search.txt 2>&1; echo "search exit $?"
grep -E "evaluations|champion:" $R/search.txt
$E champions $R/search-l1024 --out $R/champion > $R/champions.txt 2>&1; echo "champions exit $?"
sed -i "s/^name = .*/name = \"s2-$cls\"/" $R/champion/$cls.toml
echo "== evo bench CHAMPION genomes/champions/h100/$cls.toml --problem $P --cold-l2 --json bench.json" > $R/bench.txt
timeout 90 $E bench $R/champion/$cls.toml genomes/champions/h100/$cls.toml --problem $P --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"; python3 scripts/bench_best.py $R/bench.json
better=$(python3 - $R/bench.json <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
def med(name):
    xs = [r["median_us"] for r in rows if r.get("kernel") == name and r.get("median_us")]
    return xs[0] if xs else None
new, old = "s2-b4-h16-l1024-d64", "champion-b4-h16-l1024-d64"
pairs = [(med(new + s), med(old + s)) for s in ["", " (cold L2)"]]
print("yes" if all(a and b and a < b for a, b in pairs) else "no")
PY
)
echo "new champion faster warm and cold: $better"
if [ "$better" = yes ]; then
  cp $R/champion/$cls.toml genomes/champions/h100/$cls.toml
  mkdir -p $R/r3/champions
  echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/r3/record.txt
  timeout 200 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/r3/record.json >> $R/r3/record.txt 2>&1; echo "record exit $?"
  cp genomes/champions/h100/* $R/r3/champions/
  python3 scripts/bench_best.py $R/r3/record.json --top 1 > $R/r3/record_best.txt 2>&1; cat $R/r3/record_best.txt | grep -A1 "D64\|D128 f16" | head -40
fi
gzip -9 $R/search-l1024/evaluations.jsonl $R/search-l1024/lineage.json
cd $OUT && tar czf s2.tgz s2 && rm -rf s2
