# Run P8: the stream. P7 found the seed-row champion's figure set by the stream alone
# (made again: 4-5% slower; buffers, graph, events made again: no change). probe10.c makes
# the stream again before each of 12 iterations, under CUDA_DEVICE_MAX_CONNECTIONS unset
# (8), 1, 2 and 32; probe11.py times the Python module on the legacy stream and on 12
# streams from torch.cuda.Stream(); `evo bench` before and after.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p8.sh
# Output: $OUT/p8.tgz (p8/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID CUDA_DEVICE_MAX_CONNECTIONS
OUT=${OUT:-/tmp/evo-p8-out}
R=$OUT/p8; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p8-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } > $R/info.txt 2>&1
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
cc -O2 $P/probe10.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -Wl,-rpath,$X/lib -o $X/probe10 > $R/cc.txt 2>&1; echo "cc exit $?"
bench() {
  timeout 150 $E bench $C/b1-h8-l512-d64.toml --problem 1,8,512,512,64,f16 --no-sdpa > $R/bench-$1.txt 2>&1
  echo "bench $1 exit $?"; grep -E " µs \(" $R/bench-$1.txt | grep -v cublas | sed "s/^/bench $1: /" >> $S
}
bench before
for pass in 1 2; do for n in default 1 2 32; do
  if [ $n = default ]; then env -u CUDA_DEVICE_MAX_CONNECTIONS $X/probe10 $X s 12 > $R/t.txt 2>&1
  else CUDA_DEVICE_MAX_CONNECTIONS=$n $X/probe10 $X s 12 > $R/t.txt 2>&1; fi
  echo "probe10 pass $pass CUDA_DEVICE_MAX_CONNECTIONS=$n: $(cat $R/t.txt)" >> $S
done; done
timeout 200 python3 $P/probe11.py $X --streams 12 > $R/probe11.txt 2>&1; echo "probe11 exit $?"
grep "P8 torch" $R/probe11.txt >> $S || tail -5 $R/probe11.txt >> $S
bench after
rm -rf $X $R/t.txt
cat $S
cd $OUT && tar czf p8.tgz p8 && rm -rf p8
