# Run P9: FAST on a later stream. `evo` built with FAST timing on the process's second
# stream (crates/gates/src/device/mod.rs `timing_stream`) against the build before it
# (target/record/evo-old), alternated three times on the two seed rows; then the new
# build's `evo bench --champions` (f16, SDPA beside) and export_check.py against it.
# Needs target/record/evo, target/record/evo-old (or evo-old.gz) and target/record/libevo_runtime.so.
# From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p9.sh
# Output: $OUT/p9.tgz (p9/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p9-out}
R=$OUT/p9; mkdir -p $R
C=genomes/champions/h100
X=$(mktemp -d /tmp/evo-p9-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } > $R/info.txt 2>&1
[ -f target/record/evo-old ] || { gunzip -c target/record/evo-old.gz > /tmp/evo-old && chmod +x /tmp/evo-old && mkdir -p target/record && cp /tmp/evo-old target/record/evo-old; }
for i in 1 2 3; do for b in evo-old evo; do
  echo "== target/record/$b bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa" > $R/bench-$b-$i.txt
  timeout 100 target/record/$b bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 \
    --problem 1,8,512,512,64,f16,causal --no-sdpa >> $R/bench-$b-$i.txt 2>&1
  grep -E " µs \(" $R/bench-$b-$i.txt | grep -v cublas | sed "s/^/$b $i: /" >> $S
done; done
target/record/evo export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
echo "== target/record/evo bench --champions $C --json bench.json" > $R/bench.txt
timeout 240 target/record/evo bench --champions $C --json $R/bench.json >> $R/bench.txt 2>&1; echo "bench exit $?"
echo "== python3 scripts/export_check.py X --bench bench.json" > $R/export_check.txt
timeout 200 python3 scripts/export_check.py $X --bench $R/bench.json >> $R/export_check.txt 2>&1; echo "export_check exit $?"
tail -12 $R/export_check.txt >> $S
grep -A12 "ratio" $R/bench.txt | head -40 > $R/bench-table.txt
rm -rf $X
gzip -9 $R/bench.json
cat $S
cd $OUT && tar czf p9.tgz p9 && rm -rf p9
