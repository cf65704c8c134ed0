#!/bin/bash
# Where a backward candidate's ~25 s goes at B2 H16 L4096 D128 (EVO_LOG=evo_gates=debug:
# GREEN's and FAST's wall times, FAST's timed calls and their host checks apart), then
# the landscapes. Usage (repository root, one GPU): OUT=DIR bash experiments/2026-11-27-h100-bwd-search/run.sh STEP [PLAN]
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/bwd; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "cores: $(nproc)"; } >> $R/info.txt 2>&1
case $1 in
phases)
  s=$(date +%s)
  EVO_LOG=evo_gates=debug target/release/evo evolve --pass backward --problem 2,16,4096,4096,128,f16 \
    --budget 4 --seed 3 --cubin-cache off --experiment $R/phases > $R/phases.txt 2>&1
  echo "phases exit $? after $(( $(date +%s) - s )) s" | tee -a $R/info.txt
  grep -E "GREEN|FAST|GPU 0|compiles" $R/phases.txt | sed 's/\x1b\[[0-9;]*m//g' | tail -20 ;;
verdicts)
  # The hand-written backward kernels of tests/kernels get their expected verdicts (the
  # gates' GPU test, from the test binary built with --features gpu and carried here).
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/gates-tests.xz target/gates-tests
  chmod +x target/gates-tests
  s=$(date +%s)
  target/gates-tests backward::gpu_tests --test-threads=1 --nocapture > $R/verdicts.txt 2>&1
  echo "verdicts exit $? after $(( $(date +%s) - s )) s" | tee -a $R/info.txt
  tail -5 $R/verdicts.txt ;;
arrive)
  # The stage-arrive experiment (kernels/NOTES.md §18; arrive/; the lagged producer exists
  # only up to f13f752, the fix is the only producer after it): GREEN over the default
  # suite and FAST on the anchors rows for fa3-bwd and its two-stage form (the lagged
  # producer) beside the same two with EVO_STAGE_ARRIVE, one binary, one GPU; then
  # racecheck and synccheck on the two experiment modules.
  A=experiments/2026-11-27-h100-bwd-search/arrive
  s=$(date +%s)
  target/release/evo gate genomes/fa3-bwd.toml $A/fa3-bwd-s2.toml --source $A/fa3-bwd-arrive.cu \
    --source $A/fa3-bwd-arrive-s2.cu --time anchors > $R/arrive.txt 2>&1
  echo "arrive exit $? after $(( $(date +%s) - s )) s" | tee -a $R/info.txt
  for tool in racecheck synccheck; do
    compute-sanitizer --tool $tool target/release/evo gate --source $A/fa3-bwd-arrive.cu \
      --source $A/fa3-bwd-arrive-s2.cu --suite experiments/2026-11-27-h100-bwd-d256/sanitize.toml \
      --drawn 0 --time none > $R/arrive-$tool.txt 2>&1
    echo "arrive $tool exit $?" | tee -a $R/info.txt
    tail -3 $R/arrive-$tool.txt
  done
  tail -30 $R/arrive.txt ;;
landscape)
  # Every valid Hopper backward genome of plan-$2.toml: d128 (B2 H16 L4096 D128, the plan
  # of experiments/2026-11-27-h100-bwd-d256 run l1) or d64 (B4 H16 L1024 D64). A run
  # resumes from the landscape recorded here (l1/landscape-$2) when there is one, and
  # from its own folder when rerun with the same OUT.
  L=$R/landscape-$2
  if [ ! -d $L ] && [ -d experiments/2026-11-27-h100-bwd-search/l1/landscape-$2 ]; then
    cp -r experiments/2026-11-27-h100-bwd-search/l1/landscape-$2 $L
  fi
  s=$(date +%s)
  target/release/evo landscape --plan experiments/2026-11-27-h100-bwd-search/plan-$2.toml \
    --out $L ${LANDSCAPE_ARGS:-} >> $R/landscape-$2.txt 2>&1
  echo "landscape $2 exit $? after $(( $(date +%s) - s )) s" | tee -a $R/info.txt
  tail -12 $R/landscape-$2.txt ;;
esac
