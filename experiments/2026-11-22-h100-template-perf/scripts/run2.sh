#!/bin/bash
# Final GPU call: SASS counts, graph-timed sweep (base vs final template vs SDPA), then the
# correctness harness over g_run2.json. Run from the repo root with OUT set.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
cd experiments/2026-11-22-h100-template-perf/scripts
# The base template: kernels/attention.cu as of commit ddad699 (before this work).
git show ddad699:kernels/attention.cu > attention_base.cu
(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; date -u) > $OUT/bench.log
./sass.sh $OUT/sass.txt > /dev/null 2>&1; rm -f $OUT/sass.txt.full
PYTHONUNBUFFERED=1 timeout 200 python3 bench2.py $OUT 170 2>&1 | grep -v -i deprecat | grep -v 'launch()' >> $OUT/bench.log
mkdir -p $OUT/corr
HARNESS_BUDGET=330 PYTHONUNBUFFERED=1 timeout 360 python3 gpu_harness.py g_run2.json $OUT/corr > $OUT/corr.log 2>&1
md5sum ../../../kernels/attention.cu >> $OUT/corr.log
grep -E '^(B[0-9]|bench|precomp)' $OUT/bench.log; tail -12 $OUT/corr.log; cat $OUT/sass.txt
