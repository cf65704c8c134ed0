#!/bin/bash
# Run D17 (sdpa_order.py): cuDNN's grouped-decode replay figure after the other 12 classes'
# SDPA calls in the same process, as `evo bench --champions` runs them, and alone; twice.
# Usage (repository root): bash experiments/2026-11-26-h100-decode-3/run-d17.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/d17; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
timeout 500 python3 experiments/2026-11-26-h100-decode-3/sdpa_order.py 2>&1 | tee $R/order.txt
