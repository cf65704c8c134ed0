# Run D2: the first search on the grouped decode row of the models suite (B16 H32/8 Lq1
# Lk8192 D128, bottom-right causal; 0.92x cuDNN in run G3 with a screened candidate):
# `evo evolve --backend gpu --problem 16,32,1,8192,128,f16,causal=br,kv=8 --minutes 7`,
# both families, fresh seed, seeded with the named genomes, the H100 champions and D1's
# candidates; then its champion and D1's best timed with SDPA beside them.
# Needs target/record/evo.gz, built from the commit that adds this script.
# Output: $OUT/d2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-decode
P=16,32,1,8192,128,f16,causal=br,kv=8
R=$OUT/d2; mkdir -p $R
[ -f target/record/evo ] || { gunzip -c target/record/evo.gz > target/record/evo && chmod +x target/record/evo; }
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
seeds=$(mktemp -d); cp genomes/*.toml genomes/champions/h100/b*.toml $X/candidates/*.toml $seeds/
echo "== evo evolve --backend gpu --problem $P --minutes 7 --genomes SEEDS --experiment search --quiet" > $R/search.txt
timeout 500 $E evolve --backend gpu --problem $P --minutes 7 --genomes $seeds --experiment $R/search --quiet >> $R/search.txt 2>&1; echo "search exit $?"
tail -4 $R/search.txt
$E champions $R/search --out $R/champion > $R/champions.txt 2>&1; echo "champions exit $?"
c=$(ls $R/champion/*.toml | grep -v dispatch | head -1)
sed -i 's/^name = .*/name = "d2-champion"/' $c
echo "== evo bench CHAMPION $X/candidates/h-pack-c1-bn64-st2-s1.toml --problem $P --json bench.json" > $R/bench.txt
timeout 100 $E bench $c $X/candidates/h-pack-c1-bn64-st2-s1.toml --problem $P --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json
gzip -9 $R/search/evaluations.jsonl $R/search/lineage.json $R/bench.json
cd $OUT && tar czf d2.tgz d2 && rm -rf d2
