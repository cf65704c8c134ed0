# Run P5: where the memory lies. P4 found probe5.c's figure 5% higher on its second and
# later runs within one process (before PyTorch was imported) than on its first or as a
# program of its own. probe5.c (the exported seed-row champion through the C ABI, FAST's
# graph method) is run over allocation layouts (its header): as fresh programs, layouts
# 0-4; then as a library from one Python process (probe8.py), several runs in a row,
# before and after importing PyTorch.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p5.sh
# Output: $OUT/p5.tgz (p5/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p5-out}
R=$OUT/p5; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p5-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } > $R/info.txt 2>&1
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
for pass in 1 2; do for layout in 0 1 2 3 4; do for c in 0 1; do
  timeout 120 $X/probe5 $X $c 3 0 0 $layout > $R/probe5-p$pass-l$layout-c$c.txt 2>&1
  grep "P2 C-ABI" $R/probe5-p$pass-l$layout-c$c.txt | sed "s/^/program pass $pass: /" >> $S
done; done; done
echo "== python3 $P/probe8.py X libprobe5.so --rounds 3" > $R/probe8.txt
timeout 300 python3 $P/probe8.py $X $X/libprobe5.so --rounds 3 >> $R/probe8.txt 2>&1; echo "probe8 exit $?"
grep -E "^stage|P2 C-ABI" $R/probe8.txt | paste - - >> $S
bench after
rm -rf $X
cat $S
cd $OUT && tar czf p5.tgz p5 && rm -rf p5
