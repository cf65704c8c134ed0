#!/bin/bash
# NVRTC's throughput on this host with N compiles at once, as separate processes: the
# same genome (the seed-shape champion, a Hopper kernel) compiled by `evo compile` N at a
# time, 4N compiles (6 alone). Per compile = wall x N / compiles (process start and
# NVRTC's load included). Usage (repository root): bash experiments/2026-11-27-h100x4-steady/compile-scaling.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|Model name|MHz"
G=genomes/champions/h100/b1-h8-l512-d64.toml
for N in 1 4 8 16 28 48; do
  C=$((N*4)); [ $N = 1 ] && C=6
  s=$(date +%s.%N)
  seq 1 $C | xargs -P $N -I{} target/release/evo compile $G --emit report > /dev/null 2>&1
  e=$(date +%s.%N)
  python3 -c "print('procs N=$N compiles=$C wall=%.2f s per-compile=%.2f s throughput=%.1f/s' % ($e-$s, ($e-$s)*$N/$C, $C/($e-$s)))"
done
