# Run P1: probe4.py (this folder) on the exported seed-row champions (B1 H8 L512 D64 f16,
# causal and not): export_check.py's graph method with one difference from FAST flipped at
# a time (FAST's input distribution, slot pairing, O's guard layout and poison, the L2
# flush by cuMemsetD8Async, a non-blocking stream, cuMemAllocAsync's pool, a GPU spin
# before the start event) and all but the spin at once, interleaved in one process; the
# events method beside. `evo bench` of the same two champions on the same two shapes
# before and after it (the reference figure, same machine, same minutes), and whether
# `evo compile` of each champion gives the export's PTX byte for byte.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p1.sh
# Output: $OUT/p1.tgz (p1/probe4.txt ends with the summary table).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p1-out}
R=$OUT/p1; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p1-export-XXXXXX)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"; } > $R/info.txt 2>&1
echo "== $E export X --champions $C --cubin --lib target/record/libevo_runtime.so" > $R/export.txt
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so >> $R/export.txt 2>&1; echo "export exit $?"
for cls in b1-h8-l512-d64 b1-h8-l512-d64-causal; do
  $E compile $C/$cls.toml --arch sm_90 --head-dim 64 --dtype f16 --emit ptx > $R/$cls.f16.ptx 2> $R/$cls.compile-err.txt
  if cmp -s $R/$cls.f16.ptx $X/kernels/$cls.f16.ptx; then echo "$cls f16: evo compile PTX == export PTX"
  else echo "$cls f16: PTX DIFFERS from the export's"; cp $X/kernels/$cls.f16.ptx $R/$cls.f16.export.ptx; fi
done | tee $R/ptx.txt
bench() {
  echo "== $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa --json bench-$1.json" > $R/bench-$1.txt
  timeout 150 $E bench $C/b1-h8-l512-d64.toml $C/b1-h8-l512-d64-causal.toml --problem 1,8,512,512,64,f16 \
    --problem 1,8,512,512,64,f16,causal --no-sdpa --json $R/bench-$1.json >> $R/bench-$1.txt 2>&1
  echo "bench $1 exit $?"; grep -E " µs \(" $R/bench-$1.txt | grep -v cublas
}
bench before
echo "== python3 $P/probe4.py X --rounds 7" > $R/probe4.txt
timeout 360 python3 $P/probe4.py $X --rounds 7 >> $R/probe4.txt 2>&1; echo "probe4 exit $?"
bench after
rm -rf $X
head -8 $R/probe4.txt; sed -n '/P1 summary/,$p' $R/probe4.txt
gzip -9 $R/bench-*.json 2>/dev/null
cd $OUT && tar czf p1.tgz p1 && rm -rf p1
