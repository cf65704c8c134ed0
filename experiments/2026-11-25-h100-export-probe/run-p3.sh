# Run P3: P2 put the seed rows' gap in the PyTorch process (the C ABI without PyTorch runs
# the exported champion at FAST's figure, the Python module 0.58 µs a call slower, the
# kernel the same under ncu). probe6.py keeps the PyTorch process and the Python module and
# changes only how the graph is built and launched (torch.cuda.graph + replay(); torch's
# executable by cuGraphLaunch; a driver capture with flags 0; with AUTO_FREE_ON_LAUNCH);
# probe5.c (no PyTorch) is run with flags 0 and with AUTO_FREE_ON_LAUNCH beside it, and
# `evo bench` before and after.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p3.sh
# Output: $OUT/p3.tgz (p3/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p3-out}
R=$OUT/p3; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p3-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } > $R/info.txt 2>&1
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
cc -O2 $P/probe5.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -lm -Wl,-rpath,$X/lib -o $X/probe5 > $R/cc.txt 2>&1; echo "cc exit $?"
bench() {
  echo "== $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa" > $R/bench-$1.txt
  timeout 150 $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 \
    --problem 1,8,512,512,64,f16,causal --no-sdpa >> $R/bench-$1.txt 2>&1
  echo "bench $1 exit $?"; grep -E " µs \(" $R/bench-$1.txt | grep -v cublas | sed "s/^/bench $1: /" >> $S
}
cprobe() {
  for c in 0 1; do for f in 0 1; do
    timeout 120 $X/probe5 $X $c 5 $f > $R/probe5-c$c-f$f-$1.txt 2>&1
    grep "P2 C-ABI" $R/probe5-c$c-f$f-$1.txt | sed "s/^/C $1: /" >> $S
  done; done
}
bench before
cprobe before
echo "== python3 $P/probe6.py X --rounds 5" > $R/probe6.txt
timeout 300 python3 $P/probe6.py $X --rounds 5 >> $R/probe6.txt 2>&1; echo "probe6 exit $?"
grep -E "graph |^(full|causal) " $R/probe6.txt >> $S
cprobe after
bench after
rm -rf $X
cat $S
cd $OUT && tar czf p3.tgz p3 && rm -rf p3
