# Runs S2 and S3: the searches issue 17 asks for, at least 15 minutes per row, on the two
# L1024 anchors rows (0.93x and 0.97x cuDNN in run R7): `evo evolve --backend gpu
# --problem SPEC --minutes M`, both families, fresh seed, seeded with the named genomes
# and the H100 champions; one call of this script per part, the second resuming the
# folder the first wrote (committed beside this script). After each part: its champion
# (`evo champions`) and the class's recorded champion timed with SDPA beside them.
# Usage (repository root): bash experiments/2026-11-25-h100-search-l1024/run-s2.sh ROW PART MINUTES
#   ROW: nc (4,16,1024,1024,64,f16) or c (the same, causal); PART: 1, 2, ...
# Output: $OUT/s2-ROW-PART.tgz (the search folder as it stands, and the bench).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
row=$1; part=$2; minutes=$3
case $row in
  nc) P=4,16,1024,1024,64,f16; cls=b4-h16-l1024-d64 ;;
  c) P=4,16,1024,1024,64,f16,causal; cls=b4-h16-l1024-d64-causal ;;
  *) echo "ROW must be nc or c"; exit 2 ;;
esac
X=experiments/2026-11-25-h100-search-l1024
N=s2-$row-$part
R=$OUT/$N; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
# The search folder: a later part resumes the one committed in this folder.
mkdir -p $R/search
[ -d $X/search-$row ] && cp -r $X/search-$row/. $R/search/ && gunzip -f $R/search/*.gz 2>/dev/null
seeds=$(mktemp -d); cp genomes/*.toml genomes/champions/h100/b*.toml $seeds/
echo "== evo evolve --backend gpu --problem $P --minutes $minutes --genomes SEEDS --experiment search --quiet" > $R/search.txt
timeout $(( ${minutes%.*} * 60 + 90 )) $E evolve --backend gpu --problem $P --minutes $minutes --genomes $seeds \
  --experiment $R/search --quiet >> $R/search.txt 2>&1; echo "search exit $?"
tail -4 $R/search.txt
$E champions $R/search --out $R/champion > $R/champions.txt 2>&1; echo "champions exit $?"
sed -i "s/^name = .*/name = \"$N-$cls\"/" $R/champion/$cls.toml
echo "== evo bench CHAMPION genomes/champions/h100/$cls.toml --problem $P --json bench.json" > $R/bench.txt
timeout 100 $E bench $R/champion/$cls.toml genomes/champions/h100/$cls.toml --problem $P --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json
gzip -9 $R/search/evaluations.jsonl $R/search/lineage.json $R/bench.json
cd $OUT && tar czf $N.tgz $N && rm -rf $N
