# Run P4: P3 ruled out the graph's construction (torch.cuda.graph, torch's executable
# launched by the driver, a driver capture with flags 0 or torch's: all 7.32-7.35 µs in
# the PyTorch process, against 6.76 µs from probe5.c without it). probe7.py runs probe5.c
# as a library from Python before importing torch, after, and after the module timed the
# same champion; inputs drawn once or written again before every replay.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p4.sh
# Output: $OUT/p4.tgz (p4/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p4-out}
R=$OUT/p4; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p4-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; env | grep -E "^CUDA|^PYTORCH|^TORCH" ; } > $R/info.txt 2>&1
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
cc -O2 -shared -fPIC -DPROBE5_LIBRARY $P/probe5.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -lm -Wl,-rpath,$X/lib -o $X/libprobe5.so > $R/cc.txt 2>&1; echo "cc lib exit $?"
cc -O2 $P/probe5.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -lm -Wl,-rpath,$X/lib -o $X/probe5 >> $R/cc.txt 2>&1; echo "cc exit $?"
bench() {
  echo "== $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa" > $R/bench-$1.txt
  timeout 150 $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 \
    --problem 1,8,512,512,64,f16,causal --no-sdpa >> $R/bench-$1.txt 2>&1
  echo "bench $1 exit $?"; grep -E " µs \(" $R/bench-$1.txt | grep -v cublas | sed "s/^/bench $1: /" >> $S
}
bench before
for c in 0 1; do for r in 0 1; do
  timeout 120 $X/probe5 $X $c 5 0 $r > $R/probe5-c$c-r$r.txt 2>&1
  grep "P2 C-ABI" $R/probe5-c$c-r$r.txt | sed "s/^/C program: /" >> $S
done; done
echo "== python3 $P/probe7.py X libprobe5.so --rounds 5" > $R/probe7.txt
timeout 300 python3 $P/probe7.py $X $X/libprobe5.so --rounds 5 >> $R/probe7.txt 2>&1; echo "probe7 exit $?"
grep -E "^stage|P2 C-ABI|P4 torch|imported" $R/probe7.txt | grep -v "^round" >> $S
bench after
rm -rf $X
cat $S
cd $OUT && tar czf p4.tgz p4 && rm -rf p4
