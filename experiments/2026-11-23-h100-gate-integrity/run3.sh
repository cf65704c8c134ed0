set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
E=target/release/evo
CS=/usr/local/cuda/bin/compute-sanitizer
$CS --version > $R/info.txt 2>&1; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/info.txt
# just sanitize's commands (named genomes + 24 genomes drawn with seed 7, tests/sanitize/suite.toml, no drawn shapes),
# the named and the sampled halves as two processes per tool, all six at once
common=(--suite tests/sanitize/suite.toml --drawn 0 --time none)
for tool in memcheck racecheck synccheck; do
  extra=(); [ $tool = racecheck ] && extra=(--racecheck-report all)
  for half in named sampled; do
    if [ $half = named ]; then g=(genomes/*.toml); else g=(--sample 24 --seed 7); fi
    ( echo "== $CS --tool $tool ${extra[*]} --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate ${g[*]} ${common[*]}"
      timeout 420 $CS --tool $tool "${extra[@]}" --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate "${g[@]}" "${common[@]}"
      echo "exit $?" ) > $R/sanitize-$tool-$half.txt 2>&1 &
  done
done
wait
for f in $R/sanitize-*.txt; do echo "== $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|all [0-9]+ kernels passed|kernels failed|^exit" $f | tail -4; done
# the GPU test set (just gpu-test)
( EVO_REPO=$PWD timeout 170 target/release/deps/evo_gates-<hash> gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1; echo "gpu-test exit $?"; grep -E "test result|FAILED" $R/gpu-test.txt
cd $OUT && tar czf r.tgz r && rm -rf r
