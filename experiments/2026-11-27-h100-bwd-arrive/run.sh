#!/bin/bash
# The backward with the stage-arrive producer (kernels/NOTES.md §18: each producer thread
# arrives on a stage's mbarrier when its copies land, no lag), now the template's only
# producer. One GPU; writes under $OUT/arrive. Needs target/record/{evo,libevo_runtime.so,
# candle-gpu-test}.xz: `cargo build --release --workspace` and, with .cuda/env.sh sourced,
# `cargo test --release --manifest-path examples/candle-attention/Cargo.toml --features gpu
# --test gpu --no-run` (the test binary), at the commit that adds this script.
# Usage (repository root): OUT=DIR bash experiments/2026-11-27-h100-bwd-arrive/run.sh STEP...
#   candle     export the champions here, then the candle example's GPU tests on it
#   gate       GREEN and FAST (anchors rows) for fa3-bwd, its two-stage form and its D64 128-row tile
#   sanitize   memcheck, racecheck, synccheck on the backward champions and those two
#   landscape  plan-d64.toml and plan-d128.toml, every genome measured
#   bench      evo bench --champions genomes/champions/h100 --backward --cold-l2
#   gpu-test   the gates' GPU tests (hand-written kernels and their verdicts, named genomes,
#              the champions' GREEN snapshots, checked): target/record/gates-tests.xz from
#              `cargo test --release -p evo-gates --features gpu --no-run`; TESTS=FILTER
#              runs the tests whose names contain FILTER (default: gpu_tests, all)
#   profile    ncu on the D128 champion's main kernel at B2 H16 L4096 D128 (the sections of
#              experiments/2026-11-27-h100-bwd-bulk b2)
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
E=experiments/2026-11-27-h100-bwd-arrive
S2=experiments/2026-11-27-h100-bwd-search/arrive/fa3-bwd-s2.toml
R=$OUT/arrive; mkdir -p $R target/release/deps
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$1.xz $2 && chmod +x $2; }
[ -x target/release/evo ] || unxz evo target/release/evo
[ -f target/release/deps/libevo_runtime.so ] || { unxz libevo_runtime.so target/release/libevo_runtime.so; cp target/release/libevo_runtime.so target/release/deps/; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "cores: $(nproc)"; } >> $R/info.txt 2>&1
step() {  # name limit command...
  local name=$1 limit=$2; shift 2
  local s=$(date +%s)
  echo "== $*" >> $R/$name.txt
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?
  echo "$name: exit $rc after $(( $(date +%s) - s )) s ($*)" | tee -a $R/info.txt
  return $rc
}
for s in "$@"; do case $s in
candle)
  [ -x target/record/candle-gpu-test ] || unxz candle-gpu-test target/record/candle-gpu-test
  step export 120 target/release/evo export $R/export --champions genomes/champions/h100 --cubin
  ( cd examples/candle-attention && EVO_EXPORT_DIR=$R/export step candle 180 \
      ../../target/record/candle-gpu-test --test-threads=1 )
  rm -rf $R/export
  grep -E "^test |test result" $R/candle.txt ;;
gate)
  step gate 200 target/release/evo gate genomes/fa3-bwd.toml $S2 $E/fa3-bwd-d64m128.toml --time anchors
  grep "backward warm" $R/gate.txt ;;
sanitize)
  for tool in memcheck racecheck synccheck; do
    for suite in tests/sanitize/suite.toml experiments/2026-11-27-h100-bwd-d256/sanitize.toml; do
      step sanitize-$tool 100 compute-sanitizer --tool $tool --error-exitcode 3 target/release/evo gate \
        genomes/champions/h100/backward/*.toml $S2 $E/fa3-bwd-d64m128.toml --suite $suite --drawn 0 --time none
    done
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/sanitize-$tool.txt
  done ;;
landscape)
  for p in d64 d128; do
    step landscape-$p 150 target/release/evo landscape --plan $E/plan-$p.toml --out $R/landscape-$p
    tail -3 $R/landscape-$p.txt
  done ;;
bench)
  step bench 560 target/release/evo bench --champions genomes/champions/h100 --backward --cold-l2 --json $R/bench.json
  tail -22 $R/bench.txt ;;
gpu-test)
  [ -x target/record/gates-tests ] || unxz gates-tests target/record/gates-tests
  EVO_REPO=$PWD INSTA_WORKSPACE_ROOT=$PWD INSTA_UPDATE=no step gpu-test 400 target/record/gates-tests ${TESTS:-gpu_tests} --test-threads=1
  grep -E "test result|FAILED|panicked" $R/gpu-test.txt | head -12 ;;
profile)
  step ncu 200 ncu --clock-control none --kernel-name regex:'^evo_attention_bwd$' --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats \
    target/release/evo gate genomes/champions/h100/backward/d128.toml \
    --suite experiments/2026-11-27-h100-bwd-bulk/one-d128.toml --drawn 0 --time none
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall" $R/ncu.txt | head -20 ;;
esac; done
