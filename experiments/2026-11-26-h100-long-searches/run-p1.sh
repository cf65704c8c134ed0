#!/bin/bash
# Run P1: why bf16 runs the L8192 champion 2.4-3.4% faster than f16 (R1, T1, R2). One
# `evo profile` (Nsight Compute, clocks not locked) of the champion at B1 H16 L8192 D128 in
# each type, same inputs seed. Needs target/record/evo.xz.
# Usage (repository root): bash experiments/2026-11-26-h100-long-searches/run-p1.sh
# Output: $OUT/p1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/p1; mkdir -p $R
E=target/record/evo
[ -x $E ] || { python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
for t in f16 bf16; do
  echo "== evo profile genomes/champions/h100/b1-h16-l8192-d128.toml --problem 1,16,8192,8192,128,$t --out $t" > $R/$t.txt
  timeout 150 $E profile genomes/champions/h100/b1-h16-l8192-d128.toml --problem 1,16,8192,8192,128,$t --out $R/$t >> $R/$t.txt 2>&1
  echo "profile $t exit $?"; tail -30 $R/$t.txt
done
cd $OUT && tar czf p1.tgz p1 && rm -rf p1
