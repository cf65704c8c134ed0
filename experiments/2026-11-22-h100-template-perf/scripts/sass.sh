#!/bin/bash
# SASS of the template's fast path: base vs current, two configs. usage: sass.sh OUTFILE
out=$1; : > $out
base="-DEVO_BF16=0 -DEVO_QK_MATH=2 -DEVO_PV_MATH=2 -DEVO_P_REGS=1 -DEVO_O_REGS=1 -DEVO_PRODUCER_WARPS=0 -DEVO_CP_ASYNC=1 -DEVO_SMEM_LAYOUT=2 -DEVO_VEC_BYTES=16 -DEVO_EXP2=1 -DEVO_SPLIT_KV=1 -DEVO_MIN_BLOCKS=1 -DEVO_STAGES=2"
for cfg in "64 64 64 4" "128 64 64 4" "64 16 64 1"; do
  set -- $cfg; D=$1; BM=$2; BN=$3; W=$4
  smem=$(python3 -c "print($BM*$D*2 + 2*2*$BN*$D*2 + 3*$BM*4)")
  for src in attention_base.cu ../../kernels/attention.cu; do
    cp $src /tmp/k.cu
    nvcc -cubin -arch=sm_90 -std=c++17 -Xptxas=-v $base -DEVO_HEAD_DIM=$D -DEVO_BLOCK_M=$BM -DEVO_BLOCK_N=$BN -DEVO_WARPS=$W -DEVO_SMEM_BYTES=$smem -o /tmp/k.cubin /tmp/k.cu 2>/tmp/ptxas.txt || { echo "nvcc failed $cfg $src"; cat /tmp/ptxas.txt; continue; }
    cuobjdump -sass /tmp/k.cubin > /tmp/k.sass
    echo "=== D$D BM$BM BN$BN W$W $src: $(grep -o 'Used [0-9]* registers' /tmp/ptxas.txt | head -1)" >> $out
    for op in HMMA LDSM MUFU.EX2 FFMA FMUL FADD FMNMX SHFL LDGSTS BAR LDL STL STS LDS; do printf "%s=%s " $op $(grep -c "$op" /tmp/k.sass) >> $out; done; echo >> $out
  done
  # full SASS of the current version, fwd kernel only
  echo "--- full SASS (current) D$D BM$BM BN$BN W$W" >> $out.full
  cat /tmp/k.sass >> $out.full
done
cat $out
