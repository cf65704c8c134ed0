# Run M1: the new problem kinds (grouped K/V heads, the bottom-right diagonal, windows,
# decode) on the GPU, first contact. The gates' GPU test set (the default suite now
# holds every kind; the champions' GREEN snapshots are rewritten and come back for
# review); GREEN over the named genomes and the champions with a fresh seed, persistent
# kernels on a grid of 7 CTAs; memcheck and synccheck over named genomes on the
# sanitizer's suite (a grouped, bottom-right, windowed case among its three).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/m1; mkdir -p $R/snapshots
E=target/release/evo
T=$(ls -t target/release/deps/evo_gates-* | grep -v '\.d$' | head -1)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
( EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=always timeout 240 $T gpu_tests --test-threads=1 ) > $R/gpu-test.txt 2>&1
echo "gpu-test exit $?"; grep -E "test result" $R/gpu-test.txt; grep -E "FAILED|panicked" $R/gpu-test.txt | head -8
cp crates/gates/src/snapshots/*champion_green* $R/snapshots/ 2>/dev/null
C="genomes/*.toml $(ls genomes/champions/h100/b*.toml)"
echo "== EVO_PERSISTENT_GRID=7 $E gate $C --suite default --time none --json green.json" > $R/green.txt
EVO_PERSISTENT_GRID=7 timeout 150 $E gate $C --suite default --time none --json $R/green.json >> $R/green.txt 2>&1
echo "green exit $?"; tail -4 $R/green.txt
S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck synccheck; do
  echo "== EVO_PERSISTENT_GRID=3 $S --tool $tool $E gate genomes/fa2.toml genomes/fa3.toml genomes/v7a.toml genomes/champions/h100/b4-h16-l1024-d64.toml --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/sanitize-$tool.txt
  EVO_PERSISTENT_GRID=3 timeout 80 $S --tool $tool --report-api-errors no --error-exitcode 3 --print-limit 20 $E gate genomes/fa2.toml genomes/fa3.toml genomes/v7a.toml genomes/champions/h100/b4-h16-l1024-d64.toml --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/sanitize-$tool.txt 2>&1
  echo "sanitize $tool exit $?"; grep -E "ERROR SUMMARY" $R/sanitize-$tool.txt; tail -2 $R/sanitize-$tool.txt
done
cd $OUT && tar czf m1.tgz m1 && rm -rf m1
