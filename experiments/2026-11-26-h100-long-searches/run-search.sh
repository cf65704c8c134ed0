#!/bin/bash
# Runs S<n>: one long search per named anchors row over today's template (both families, all
# 26 genes), seeded with the class's champion first, then the champions of its neighbour
# classes (same head dim) and the named genomes; its champion (`evo champions`) then timed
# against the class's recorded champion with SDPA beside them, warm and cold L2.
# Nothing is replaced here: a champion that differs from the class's and is faster warm and
# cold is copied into genomes/champions/h100 by the commit that records this run.
# Needs target/record/evo.xz, built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-26-h100-long-searches/run-search.sh RUN ROW[:FROM] MINUTES [ROW[:FROM] MINUTES]
#   ROW: l4096c (B2 H16 L4096 D128 causal), l8192 (B1 H16 L8192 D128), l4096 (B2 H16 L4096 D128),
#        seed (B1 H8 L512 D64), seedc (B1 H8 L512 D64 causal),
#        d256 (B1 H16/8 L4096 D256 causal), d96 (B1 H32 L4096 D96 causal),
#        decode (B16 H32/8 Lq1 Lk8192 D128 causal-br; added for run S1 of
#        experiments/2026-11-26-h100-decode-3)
#   EXTRA_SEEDS (environment): more genome files to seed each search with, after the class's
#   champion (e.g. a twin timed faster than it).
#   FROM: an earlier search folder of the row to resume (`evo evolve --experiment` replays its
#   evaluations and goes on from its population), instead of a new search.
# Output: $OUT/RUN.tgz (each search folder, its champion and bench).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
C=genomes/champions/h100
run=$1; shift
R=$OUT/$run; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
while [ $# -ge 2 ]; do
  row=${1%%:*} from=""; minutes=$2
  [ "$row" = "$1" ] || from=${1#*:}
  shift 2
  case $row in
  l4096c) P=2,16,4096,4096,128,f16,causal; cls=b2-h16-l4096-d128-causal
    near="b2-h16-l4096-d128 b1-h32kv8-l4096-d128-causal b1-h16-l8192-d128" ;;
  l8192) P=1,16,8192,8192,128,f16; cls=b1-h16-l8192-d128
    near="b2-h16-l4096-d128 b2-h16-l4096-d128-causal b1-h32kv8-l4096-d128-causal" ;;
  l4096) P=2,16,4096,4096,128,f16; cls=b2-h16-l4096-d128
    near="b1-h16-l8192-d128 b2-h16-l4096-d128-causal b1-h32kv8-l4096-d128-causal" ;;
  seed) P=1,8,512,512,64,f16; cls=b1-h8-l512-d64
    near="b1-h8-l512-d64-causal b4-h16-l1024-d64 b4-h16-l1024-d64-causal" ;;
  seedc) P=1,8,512,512,64,f16,causal; cls=b1-h8-l512-d64-causal
    near="b1-h8-l512-d64 b4-h16-l1024-d64-causal b4-h16-l1024-d64" ;;
  d256) P=1,16,4096,4096,256,f16,causal,kv=8; cls=b1-h16kv8-l4096-d256-causal
    near="b1-h32-l4096-d96-causal b1-h32kv8-l4096-d128-causal" ;;
  d96) P=1,32,4096,4096,96,f16,causal; cls=b1-h32-l4096-d96-causal
    near="b1-h16kv8-l4096-d256-causal b1-h32kv8-l4096-d128-causal b2-h16-l4096-d128-causal" ;;
  decode) P=16,32,1,8192,128,f16,causal=br,kv=8; cls=b16-h32kv8-lq1-lk8192-d128-causal-br
    near="b16-h32kv1-lq1-lk8192-d128-causal-br b1-h32kv8-l4096-d128-causal" ;;
  *) echo "unknown row $row"; exit 2 ;;
  esac
  seeds=$R/seeds-$row; mkdir -p $seeds
  cp $C/$cls.toml $seeds/0-$cls.toml
  for x in ${EXTRA_SEEDS:-}; do cp $x $seeds/0-x-$(basename $x); done
  for n in $near; do cp $C/$n.toml $seeds/1-$n.toml; done
  cp genomes/*.toml $seeds/
  if [ -n "$from" ]; then
    cp -r $from $R/search-$row && gunzip $R/search-$row/*.gz
    b=$(basename $from); seeds=$(dirname $from)/seeds-${b#search-}  # the resumed search's own seeds
  fi
  echo "== evo evolve --backend gpu --problem $P --minutes $minutes --genomes ${seeds#$R/} --experiment search-$row --quiet" > $R/search-$row.txt
  timeout $(( ${minutes%.*} * 60 + 90 )) $E evolve --backend gpu --problem $P --minutes $minutes --genomes $seeds \
    --experiment $R/search-$row --quiet >> $R/search-$row.txt 2>&1; echo "search $row exit $?"
  tail -3 $R/search-$row.txt
  $E champions $R/search-$row --out $R/champion-$row > $R/champions-$row.txt 2>&1; echo "champions $row exit $?"
  sed -i "s/^name = .*/name = \"$run-$row-$cls\"/" $R/champion-$row/$cls.toml
  echo "== evo bench CHAMPION $C/$cls.toml --problem $P --cold-l2 --json bench-$row.json" > $R/bench-$row.txt
  timeout 120 $E bench $R/champion-$row/$cls.toml $C/$cls.toml --problem $P --cold-l2 --json $R/bench-$row.json >> $R/bench-$row.txt 2>&1
  echo "bench $row exit $?"
  python3 scripts/bench_best.py $R/bench-$row.json
  gzip -9 $R/search-$row/evaluations.jsonl $R/search-$row/lineage.json
done
cd $OUT && tar czf $run.tgz $run && rm -rf $run
