# One call of the per-shape searches: `search.sh MINUTES SPEC...`. Each search is an
# `evo evolve --backend gpu --problem SPEC --minutes MINUTES` (both families, fresh seed,
# printed and recorded in its experiment.toml), seeded with the named genomes, the
# champions of genomes/champions/h100 and this experiment's candidates of the shape's
# head dim. Output: $OUT/s-SLUG.tgz per search (its experiment folder and log), written
# as each ends; a search that would not end inside the call's 600 s is left out.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-24-h100-champions-2
E=target/release/evo
minutes=$1; shift
secs=$(python3 -c "print(int(float('$minutes') * 60))")
R=$OUT/s; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
start=$SECONDS
for spec in "$@"; do
  slug=$(echo $spec | tr ',' '-')
  if [ $((SECONDS - start + secs + 45)) -gt 570 ]; then echo "== $spec left out: no time left in this call"; continue; fi
  d=$(echo $spec | cut -d, -f5)
  seeds=$(mktemp -d)
  cp genomes/*.toml genomes/champions/h100/b*.toml $seeds/
  for f in $X/candidates/*.toml; do
    case $(basename $f) in d128*) [ $d = 128 ] && cp $f $seeds/;; *) [ $d = 64 ] && cp $f $seeds/;; esac
  done
  echo "== $E evolve --backend gpu --problem $spec --minutes $minutes --genomes SEEDS($(ls $seeds | wc -l) files) --experiment RESULTS/$slug --quiet"
  timeout $((secs + 90)) $E evolve --backend gpu --problem $spec --minutes $minutes --genomes $seeds --experiment $R/$slug --quiet > $R/$slug.txt 2>&1
  echo "exit $?"; grep -E "^[0-9]+ evaluations|^champion|seed" $R/$slug.txt | head -5
  tar czf $OUT/s-$slug.tgz -C $R $slug $slug.txt info.txt
done
rm -rf $R
