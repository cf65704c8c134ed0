# Run P7: which object made again makes a run slower (P4-P6). probe10.c times the exported
# non-causal seed-row champion 4 times in one process, making again before iterations 2-4
# only the stream, the buffers, the graph, the events, all four, or the whole context.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p7.sh
# Output: $OUT/p7.tgz (p7/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p7-out}
R=$OUT/p7; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p7-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
cc -O2 $P/probe10.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -Wl,-rpath,$X/lib -o $X/probe10 > $R/cc.txt 2>&1; echo "cc exit $?"
for pass in 1 2; do for what in - g e s b sbge c; do
  timeout 60 $X/probe10 $X $what 4 >> $R/probe10.txt 2>&1; echo "probe10 $what exit $?" >> $R/probe10.txt
done; done
cp $R/probe10.txt $S
rm -rf $X
cat $S
cd $OUT && tar czf p7.tgz p7 && rm -rf p7
