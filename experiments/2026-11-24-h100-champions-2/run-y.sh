# Run Y: the seed-shape rows again (1.47x against the 1.5x bar): 2.4-minute searches of
# both, seeded with the recorded champions; `evo champions` takes their champions into
# genomes/champions/h100 (the other classes stay); then the whole table recorded again
# (`evo bench --champions ... --record --cold-l2`, f16; bf16). Output: $OUT/y.tgz and
# s-*.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-24-h100-champions-2
E=target/release/evo
bash $X/search.sh 2.4 1,8,512,512,64,f16 1,8,512,512,64,f16,causal
R=$OUT/y; mkdir -p $R/searches
for s in $OUT/s-*.tgz; do tar xzf $s -C $R/searches; done
$E champions $R/searches/1-8-512-512-64-f16 $R/searches/1-8-512-512-64-f16-causal --out genomes/champions/h100 > $R/champions.txt 2>&1; echo "champions exit $?"; cat $R/champions.txt
timeout 150 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/bench_f16.json > $R/bench_f16.txt 2>&1; echo "f16 exit $?"
timeout 100 $E bench --champions genomes/champions/h100 --dtype bf16 --json $R/bench_bf16.json > $R/bench_bf16.txt 2>&1; echo "bf16 exit $?"
cp -r genomes/champions/h100 $R/champions
python3 scripts/bench_best.py $R/bench_f16.json --top 1 | tee $R/best_f16.txt
python3 scripts/bench_best.py $R/bench_bf16.json --top 1 > $R/best_bf16.txt
rm -rf $R/searches
cd $OUT && tar czf y.tgz y && rm -rf y
