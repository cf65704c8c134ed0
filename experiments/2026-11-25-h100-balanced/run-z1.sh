# Run Z1: compute-sanitizer (memcheck, racecheck, synccheck) over the two L1024 champions,
# three consumer warpgroups each (ping-pong on and off), on tests/sanitize/suite.toml's
# small odd shapes, where balanced blocks leave warpgroups idle (`just sanitize`'s gate,
# on these two genomes). Needs target/record/evo.gz, built from the commit that adds
# this script. Usage: bash experiments/2026-11-25-h100-balanced/run-z1.sh. Output: $OUT/z1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/z1; mkdir -p $R
E=target/record/evo
gunzip -c $E.gz > $E && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
G="genomes/champions/h100/b4-h16-l1024-d64.toml genomes/champions/h100/b4-h16-l1024-d64-causal.toml"
for tool in memcheck racecheck synccheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate $G --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/$tool.log
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $G --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|kernels passed|kernels failed" $R/$tool.log | tail -3
done
cd $OUT && tar czf z1.tgz z1 && rm -rf z1
