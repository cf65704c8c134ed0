#!/bin/bash
# Run S2: as run S1 (one steady-state search at the seed shape, budget 300, seed 11, the
# CUBIN cache off, one GPU and two, in the order 1-2-2-1 after a warm-up on two), on a
# build whose compile threads yield to the GPUs' workers (nice 10), with the in-flight
# count the two-GPU evaluator now picks itself: 3 per GPU and one per compile thread
# (a candidate is one variant at the seed shape since the screen runs at the objective's
# variants), 6 + 30 = 36 on 32 cores, given to both configurations so they run the
# same search. S1 gave both 21, the count for two variants a candidate.
# Usage (repository root, on a host of two GPUs): bash experiments/2026-11-26-h100x2-steady/run-s2.sh
# Run S3 is `RUN=s3 bash experiments/2026-11-26-h100x2-steady/run-s2.sh warmup:0,1:16 c2:0,1:300 c1:0:300`:
# the runs NAME:GPUS:BUDGET given on the command line, in that order, under $OUT/$RUN.
# Run S4 is S3 with IN_FLIGHT=21 EVOLVE_ARGS="--compile-threads 15": half the 32 logical
# cores compile, so the GPUs' workers keep a core of their own.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
RUN=${RUN:-s2}
R=$OUT/$RUN; mkdir -p $R/runs
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version --format=csv; echo "cores: $(nproc)"; } > $R/host.txt 2>&1
in_flight=${IN_FLIGHT:-$((6 + $(nproc) - 2))}
runs=${*:-warmup:0,1:16 a1:0:300 a2:0,1:300 b2:0,1:300 b1:0:300}
for label in $runs; do
  IFS=: read name gpus budget <<< "$label"
  s=$(date +%s.%N)
  timeout 280 target/release/evo evolve --steady --in-flight $in_flight --budget $budget --seed 11 \
    --experiment $R/runs/$name --cubin-cache off --quiet --gpus $gpus ${EVOLVE_ARGS:-} > $R/$name.txt 2>&1
  rc=$?; e=$(date +%s.%N)
  [ $name = warmup ] && continue
  awk -v l=$name -v g=$gpus -v b=$budget -v s=$s -v e=$e -v rc=$rc -v f=$in_flight \
    'BEGIN { w = e - s; n = split(g, x, ","); printf "RESULT %s gpus=%d budget=%d in_flight=%d rc=%s wall_s=%.1f evals_per_min=%.1f\n", l, n, b, f, rc, w, b / w * 60 }' | tee -a $R/results.txt
done
grep -HE "GPU [0-9]:|compiles:" $R/*.txt | sed "s|$R/||"
awk '/^RESULT/ { split($3, g, "="); split($8, r, "="); s[g[2]] += r[2]; n[g[2]]++ }
     END { printf "1 GPU %.1f/min, 2 GPUs %.1f/min: %.2fx\n", s[1]/n[1], s[2]/n[2], (s[2]/n[2]) / (s[1]/n[1]) }' $R/results.txt | tee -a $R/results.txt
cd $OUT && tar czf $RUN.tgz $RUN && rm -rf $RUN
