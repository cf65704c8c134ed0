#!/bin/bash
# Run D15: compute-sanitizer memcheck, racecheck and synccheck over the seven named keys
# twins in genomes/ (GREEN only, tests/sanitize/suite.toml, no drawn shapes: every launch
# costs 100x under the tools). Needs target/record/evo.xz built from the commit that adds
# this script. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d15.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d15; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
for tool in memcheck racecheck synccheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate genomes/*.toml --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/$tool.log
  timeout 170 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $X/genomes/*.toml --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kernels passed|kernels failed" $R/$tool.log | tail -3
done
