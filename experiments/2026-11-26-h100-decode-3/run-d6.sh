#!/bin/bash
# Run D6: Nsight Compute on SDPA's grouped decode kernels (sdpa_ncu.py: cuDNN and flash,
# the fourth call of each) and on the champion, one launch each, clocks not locked.
# Needs target/record/evo.xz. Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d6.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-decode-3
R=$OUT/d6; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
NCU=/usr/local/cuda/bin/ncu
timeout 300 $NCU --clock-control none --nvtx --nvtx-include "cudnn/" --nvtx-include "flash/" \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
  python3 $X/sdpa_ncu.py > $R/ncu-sdpa.txt 2>&1
echo "ncu exit $?"
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Grid Size|Block Size|Registers Per|Dynamic Shared|Static Shared|Waves Per|Achieved Occupancy|Memory Throughput|Threads  " $R/ncu-sdpa.txt | sed 's/  */ /g' | cut -c1-160
