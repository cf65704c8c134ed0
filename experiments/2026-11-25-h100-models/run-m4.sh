# Run M4: the pack_gqa gene (a K/V head's query heads packed into one CTA's rows) on the
# GPU. GREEN over the candidates (pack_gqa beside named genomes and the D128 anchors
# champions; decode candidates with split-KV) on the default suite (every new kind),
# persistent kernels on a grid of 7 CTAs, fresh seed; GREEN over 100 sampled genomes of
# each family (pack_gqa drawn like any gene); memcheck and synccheck over the pack
# candidates on the sanitizer's suite; then `evo bench --suite models` of the
# candidates, fa3 and the D128 champions beside PyTorch SDPA (graph and cold L2).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-models
R=$OUT/m4; mkdir -p $R
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
C=$(ls $X/candidates/*.toml)
echo "== EVO_PERSISTENT_GRID=7 $E gate CANDIDATES --suite default --time none --json green.json" > $R/green.txt
EVO_PERSISTENT_GRID=7 timeout 100 $E gate $C --suite default --time none --json $R/green.json >> $R/green.txt 2>&1
echo "green exit $?"; tail -2 $R/green.txt
for fam in hopper ampere; do
  echo "== EVO_PERSISTENT_GRID=7 $E gate --sample 100 --family $fam --suite default --time none --save-samples samples-$fam" > $R/sample-$fam.txt
  EVO_PERSISTENT_GRID=7 timeout 120 $E gate --sample 100 --family $fam --suite default --time none --json $R/sample-$fam.json --save-samples $R/samples-$fam >> $R/sample-$fam.txt 2>&1
  echo "sample $fam exit $?"; tail -2 $R/sample-$fam.txt
  echo "pack_gqa on in $(grep -l 'pack_gqa = "on"' $R/samples-$fam/*.toml | wc -l) of $(ls $R/samples-$fam | wc -l) samples"
done
S=/usr/local/cuda/bin/compute-sanitizer
P=$(ls $X/candidates/*pack*.toml | head -4)
for tool in memcheck synccheck; do
  echo "== EVO_PERSISTENT_GRID=3 $S --tool $tool $E gate PACK-CANDIDATES --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/sanitize-$tool.txt
  EVO_PERSISTENT_GRID=3 timeout 60 $S --tool $tool --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate $P --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/sanitize-$tool.txt 2>&1
  echo "sanitize $tool exit $?"; grep -E "ERROR SUMMARY" $R/sanitize-$tool.txt | tail -1
done
G="genomes/fa3.toml $(ls genomes/champions/h100/b*d128*.toml) $C"
echo "== $E bench GENOMES --suite models --dtype f16 --cold-l2 --json bench.json" > $R/bench.txt
timeout 330 $E bench $G --suite models --dtype f16 --cold-l2 --json $R/bench.json >> $R/bench.txt 2>&1
echo "bench exit $?"
python3 scripts/bench_best.py $R/bench.json --top 3 2>&1 | tail -30
cd $OUT && tar czf m4.tgz m4 && rm -rf m4
