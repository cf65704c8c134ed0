# Run G4: the gates' GPU test set with the champions' GREEN snapshots rewritten for the
# default suite's new cases (crates/gates/src/snapshots/*champion_green*, for review);
# memcheck and synccheck over the named genomes and D96/D256 variants on
# tests/sanitize/suite.toml (now with a D96 and a D256 case); the rest of run G2's Ampere
# sample (same seed, from the 55th). Output: $OUT/g4.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g4; mkdir -p $R/snapshots
E=target/record/evo
T=$(ls -t target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 170 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" -A3 $R/gpu-test.txt | head -12
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/
G=experiments/2026-11-25-h100-headdims/genomes
S="genomes/*.toml $G/h-d96-cpasync.toml $G/h-d96-persist.toml $G/h-d96-pack.toml $G/h-d256-wg2-bn80.toml $G/h-d256-wg2-bn64-cp-persist-pack-split4.toml $G/a-split4.toml $G/a-pack.toml $G/a-vec4.toml"
for tool in memcheck synccheck; do
  echo "== compute-sanitizer --tool $tool evo gate $S --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/sanitize-$tool.txt
  timeout 110 /usr/local/cuda/bin/compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate $S --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/sanitize-$tool.txt 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|passed GREEN" $R/sanitize-$tool.txt | tail -2
done
echo "== EVO_PERSISTENT_GRID=7 evo gate --sample 100 --family ampere --seed 6038688641988655 --from 55 --suite default --time none" > $R/sample-ampere.txt
EVO_PERSISTENT_GRID=7 timeout 120 $E gate --sample 100 --family ampere --seed 6038688641988655 --from 55 --suite default --time none >> $R/sample-ampere.txt 2>&1; echo "sample ampere exit $?"; tail -1 $R/sample-ampere.txt
cd $OUT && tar czf g4.tgz g4 && rm -rf g4
