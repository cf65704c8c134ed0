# Run S1: a 6-minute search on B4 H16 L1024 D64 f16 (the anchors row furthest below
# cuDNN, 0.93x in run R7 of experiments/2026-11-25-h100-record): `evo evolve --backend gpu
# --problem 4,16,1024,1024,64,f16 --minutes 6`, both families, fresh seed, seeded with the
# named genomes and the H100 champions; then its champion (`evo champions`) and the
# class's recorded champion timed with SDPA beside them (`evo bench --problem`).
# Output: $OUT/s1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/s1; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
seeds=$(mktemp -d); cp genomes/*.toml genomes/champions/h100/b*.toml $seeds/
echo "== evo evolve --backend gpu --problem 4,16,1024,1024,64,f16 --minutes 6 --genomes SEEDS --experiment search --quiet" > $R/search.txt
timeout 420 $E evolve --backend gpu --problem 4,16,1024,1024,64,f16 --minutes 6 --genomes $seeds --experiment $R/search --quiet >> $R/search.txt 2>&1; echo "search exit $?"
tail -4 $R/search.txt
$E champions $R/search --out $R/champion > $R/champions.txt 2>&1; echo "champions exit $?"
sed -i 's/^name = .*/name = "s1-b4-h16-l1024-d64"/' $R/champion/b4-h16-l1024-d64.toml
echo "== evo bench CHAMPION genomes/champions/h100/b4-h16-l1024-d64.toml --problem 4,16,1024,1024,64,f16 --json bench.json" > $R/bench.txt
timeout 100 $E bench $R/champion/b4-h16-l1024-d64.toml genomes/champions/h100/b4-h16-l1024-d64.toml --problem 4,16,1024,1024,64,f16 --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json
cd $OUT && tar czf s1.tgz s1 && rm -rf s1
