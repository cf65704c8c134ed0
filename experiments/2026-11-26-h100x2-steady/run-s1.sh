#!/bin/bash
# Run S1: one steady-state search at the seed shape on one GPU and on two, with the
# method and script of experiments/2026-11-24-h200x2-steady-state (its measure.sh, seed
# phase: budget 300, seed 11, the in-flight count of that run's two-GPU evaluator on this
# host, the CUBIN cache off, 1-2-2-1 GPUs after a warm-up), on a build whose screen
# compiles a candidate only at the variants its search times.
# Usage (repository root, on a host of two GPUs): bash experiments/2026-11-26-h100x2-steady/run-s1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
export OUT=$OUT/s1
mkdir -p $OUT
EVO=target/release/evo bash experiments/2026-11-24-h200x2-steady-state/measure.sh seed > $OUT/seed-phase.txt 2>&1
grep -hE "compiles:" $OUT/*.txt | head -20
tail -25 $OUT/seed-phase.txt
cd $(dirname $OUT) && tar czf s1.tgz s1 && rm -rf s1
