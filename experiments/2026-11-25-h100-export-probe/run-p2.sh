# Run P2: what is left after P1 — the process (PyTorch's or not) and the graph's
# construction (captured and replayed as is, or re-pointed before each replay as FAST
# does). The exported seed-row champions (B1 H8 L512 D64 f16, causal and not) are timed
#  1. by FAST (`evo bench`, no SDPA), before and after the rest (the reference figure);
#  2. through the C ABI in a C program with no PyTorch (probe5.c), the graph replayed
#     plain, re-pointed to other input sets before each replay, or re-pointed to its own;
#  3. through the Python module (probe5.py time: probe4.py's "base" figure);
# and each kernel alone under ncu (--clock-control none, caches flushed), once launched
# by `evo bench` and once by the Python module: duration, cycles, clock and launch shape.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p2.sh
# Output: $OUT/p2.tgz (p2/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p2-out}
R=$OUT/p2; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p2-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; ncu --version | tail -1; } > $R/info.txt 2>&1
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
cc -O2 $P/probe5.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -lm -Wl,-rpath,$X/lib -o $X/probe5 > $R/cc.txt 2>&1; echo "cc exit $?"
bench() {
  echo "== $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa" > $R/bench-$1.txt
  timeout 150 $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 \
    --problem 1,8,512,512,64,f16,causal --no-sdpa >> $R/bench-$1.txt 2>&1
  echo "bench $1 exit $?"; grep -E " µs \(" $R/bench-$1.txt | grep -v cublas | sed "s/^/bench $1: /" >> $S
}
bench before
for c in 0 1; do
  echo "== probe5 X $c 7" > $R/probe5-c$c.txt
  timeout 120 $X/probe5 $X $c 7 >> $R/probe5-c$c.txt 2>&1; echo "probe5 causal=$c exit $?"
  grep "P2 C-ABI" $R/probe5-c$c.txt >> $S
done
echo "== python3 $P/probe5.py X time --rounds 5" > $R/probe5-py.txt
timeout 150 python3 $P/probe5.py $X time --rounds 5 >> $R/probe5-py.txt 2>&1; echo "probe5.py exit $?"
grep "P2 torch" $R/probe5-py.txt >> $S
# The C program again after the Python side: the same minutes on both sides.
for c in 0 1; do
  timeout 120 $X/probe5 $X $c 5 > $R/probe5-c$c-again.txt 2>&1
  grep "P2 C-ABI" $R/probe5-c$c-again.txt | sed "s/^/again: /" >> $S
done
M=gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_elapsed.avg.per_second,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,dram__bytes_read.sum,dram__bytes_write.sum
NCU="ncu --clock-control none --cache-control all -k regex:evo_attention_fwd --csv --page raw --metrics $M"
timeout 150 $NCU --launch-skip 100 --launch-count 40 $E bench $C/b1-h8-l512-d64.toml --problem 1,8,512,512,64,f16 --no-sdpa > $R/ncu-bench.csv 2> $R/ncu-bench.err; echo "ncu bench exit $?"
timeout 150 $NCU --launch-skip 10 --launch-count 40 python3 $P/probe5.py $X loop > $R/ncu-py.csv 2> $R/ncu-py.err; echo "ncu py exit $?"
for f in ncu-bench ncu-py; do python3 $P/ncu_summary.py $R/$f.csv >> $S 2>&1; done
bench after
rm -rf $X
cat $S
cd $OUT && tar czf p2.tgz p2 && rm -rf p2
