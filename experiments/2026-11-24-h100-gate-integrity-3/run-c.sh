# Run C: GREEN with the device reference (every row of the large cases) and FAST with
# its device checks over the named genomes, the per-shape champions and 300 genomes
# drawn uniformly, with a fresh seed; then compute-sanitizer (memcheck, racecheck,
# synccheck) over `just sanitize`'s GREEN run and over a FAST of two Hopper genomes on
# the seed shape (the device draws, the reference, the row comparison and the
# re-pointed graph under the tools). Output under $OUT/r (tarred).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
CS=/usr/local/cuda/bin/compute-sanitizer
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; $CS --version | tail -1; } > $R/info.txt 2>&1
champions=$(ls genomes/champions/h100/*.toml | grep -v dispatch.toml)
echo "== $E gate genomes/*.toml $champions --sample 300 --suite default --time seed --json sweep.json" > $R/sweep.txt
timeout 330 $E gate genomes/*.toml $champions --sample 300 --suite default --time seed --json $R/sweep.json >> $R/sweep.txt 2>&1
echo "sweep exit $?"; grep -E "GREEN:|kernels passed|kernels failed|FAIL|GPU part" $R/sweep.txt | head -12
for tool in memcheck racecheck synccheck; do
  extra=(); [ $tool = racecheck ] && extra=(--racecheck-report all)
  for part in green fast; do
    if [ $part = green ]; then g=(genomes/*.toml --sample 24 --seed 7 --time none); else g=(genomes/fa3.toml genomes/champion-h100-seed.toml --time seed); fi
    ( echo "== $CS --tool $tool ${extra[*]} --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate ${g[*]} --suite tests/sanitize/suite.toml --drawn 0"
      timeout 220 $CS --tool $tool "${extra[@]}" --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate "${g[@]}" --suite tests/sanitize/suite.toml --drawn 0
      echo "exit $?" ) > $R/sanitize-$tool-$part.txt 2>&1 &
  done
done
wait
for f in $R/sanitize-*.txt; do echo "== $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|all [0-9]+ kernels passed|kernels failed|FAST|^exit" $f | tail -5; done
cd $OUT && tar czf r.tgz r && rm -rf r
