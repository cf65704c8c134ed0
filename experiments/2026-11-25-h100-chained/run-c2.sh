# Run C2: C1's chained kernels failed FAST's re-check at B4 H16 L1024 (rows left NaN) after
# passing GREEN, whose small shapes give a persistent CTA one tile. GREEN again with the
# persistent grid capped (EVO_PERSISTENT_GRID = 1, 2, 3: every CTA loops over several
# tiles, so chains form), then memcheck, racecheck and synccheck on the sanitizer suite
# with a grid of 2. Output: $OUT/c2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/c2; mkdir -p $R
E=target/record/evo
G=experiments/2026-11-25-h100-chained/genomes
S=/usr/local/cuda/bin/compute-sanitizer
for n in 1 2 3; do
  echo "== EVO_PERSISTENT_GRID=$n evo gate $G/*.toml --suite default --time none --seed 5" > $R/green-grid$n.txt
  EVO_PERSISTENT_GRID=$n timeout 120 $E gate $G/*.toml --suite default --time none --seed 5 >> $R/green-grid$n.txt 2>&1; echo "grid $n green exit $?"
  grep -E "FAIL|passed GREEN|failed" $R/green-grid$n.txt | cut -c1-400 | head -12
done
for tool in memcheck racecheck synccheck; do
  extra=(); [ $tool = racecheck ] && extra=(--racecheck-report all)
  echo "== EVO_PERSISTENT_GRID=2 $S --tool $tool evo gate $G/l1024-wg2-chained.toml $G/causal-chained.toml --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/$tool.txt
  EVO_PERSISTENT_GRID=2 timeout 150 $S --tool $tool "${extra[@]}" --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $G/l1024-wg2-chained.toml $G/causal-chained.toml --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/$tool.txt 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|passed GREEN|failed" $R/$tool.txt | head -5
done
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
