#!/bin/bash
# Run D1: GREEN over 300 uniformly drawn valid Hopper genomes (the space now holds
# cluster_combine), then compute-sanitizer (memcheck, racecheck, synccheck) over the
# cluster-merge genomes of this folder on tests/sanitize/suite.toml's small odd shapes
# (`just sanitize`'s gate). Needs target/record/evo.gz built from the commit that adds
# this script. Usage: bash experiments/2026-11-25-h100-cluster-combine/run-d1.sh.
# Output: $OUT/d1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-25-h100-cluster-combine
R=$OUT/d1; mkdir -p $R
E=target/record/evo
gunzip -c $E.gz > $E && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo gate --sample 300 --family hopper --seed 2026112501 --time none --save-samples samples --json sample.json" > $R/sample.txt
timeout 300 $E gate --sample 300 --family hopper --seed 2026112501 --time none --save-samples $R/samples \
  --json $R/sample.json >> $R/sample.txt 2>&1; echo "sample exit $?"; tail -2 $R/sample.txt
echo "cluster_combine genomes in the sample: $(grep -l 'cluster_combine = "on"' $R/samples/*.toml | wc -l)" | tee -a $R/sample.txt
G="$X/genomes/seed-c2.toml $X/genomes/seedc-c2.toml $X/genomes/mqa-c4.toml $X/genomes/mqa-c8.toml"
for tool in memcheck racecheck synccheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate $G --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/$tool.log
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $G --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|kernels passed|kernels failed" $R/$tool.log | tail -3
done
gzip -9 $R/sample.json
cd $OUT && tar czf d1.tgz d1 && rm -rf d1
