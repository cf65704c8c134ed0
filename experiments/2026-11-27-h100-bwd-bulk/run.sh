#!/bin/bash
# The Hopper backward's dQ by whole-unit bulk reduce-adds, against the red adds and cuDNN.
# Run b1: `evo gate` (default GREEN suite + drawn shapes, FAST on the seven anchors shapes,
# warm and cold L2) on fa3-bwd (red adds), fa3-bwd-bulk and fa3-bwd-bulk-bm128; PyTorch's
# cuDNN and flash backward on the same shapes in the same run
# (scripts/sdpa_backward_baseline.py, graph and cold L2); compute-sanitizer memcheck,
# racecheck and synccheck over the bulk genome on the quick suite.
# Run b2: see its case below.
# Needs target/record/evo.xz (this commit's evo). Usage (repository root):
#   bash experiments/2026-11-27-h100-bwd-bulk/run.sh b1
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-27-h100-bwd-bulk
R=$OUT/$1; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
run_logged() {  # log-name time-limit command...
  local log=$R/$1.txt limit=$2; shift 2
  echo "== $*" >> $log
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $log 2>&1
  echo "exit $? ($*)" | tee -a $log
}
case $1 in
b1)
  run_logged gate 330 target/release/evo gate genomes/fa3-bwd.toml $X/fa3-bwd-bulk.toml $X/fa3-bwd-bulk-bm128.toml --time anchors --json $R/gate.json
  run_logged baselines 120 python3 scripts/sdpa_backward_baseline.py --shapes "$(cat $X/anchors.json)" --backends cudnn,flash --cold-l2
  for tool in memcheck racecheck synccheck; do
    run_logged sanitize 60 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate $X/fa3-bwd-bulk.toml --suite quick --drawn 0 --time none
  done
  ;;
b2)
  # b1's kernels with dK issued after the first dQ unit (it runs while the unit is added);
  # one launch of the bulk genome's main kernel under Nsight Compute at B2 H16 L4096 D128.
  run_logged gate 330 target/release/evo gate genomes/fa3-bwd.toml $X/fa3-bwd-bulk.toml --time anchors --json $R/gate.json
  run_logged baselines 120 python3 scripts/sdpa_backward_baseline.py --shapes "$(cat $X/anchors.json)" --backends cudnn,flash --cold-l2
  run_logged ncu 200 ncu --clock-control none --kernel-name regex:'^evo_attention_bwd$' --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats target/release/evo gate $X/fa3-bwd-bulk.toml --suite $X/one-d128.toml --drawn 0 --time none
  ;;
b3)
  # The dQ step one item late (no barrier of the consumers per item): fa3-bwd (now the
  # bulk adds), its red-add form and the 128-row D64 form; the sanitizers on fa3-bwd.
  run_logged gate 330 target/release/evo gate genomes/fa3-bwd.toml $X/fa3-bwd-atomic.toml $X/fa3-bwd-bulk-bm128.toml --time anchors --json $R/gate.json
  run_logged baselines 120 python3 scripts/sdpa_backward_baseline.py --shapes "$(cat $X/anchors.json)" --backends cudnn,flash --cold-l2
  for tool in memcheck racecheck synccheck; do
    run_logged sanitize 60 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate genomes/fa3-bwd.toml --suite quick --drawn 0 --time none
  done
  ;;
b4)
  # The final template (b2's kernel: bulk adds, dK after the first dQ unit; the red-add
  # form with dK beside dV): fa3-bwd through the gate, the baselines, the sanitizers;
  # then a backward search at B4 H16 L1024 D64 from the named backward genomes.
  run_logged gate 200 target/release/evo gate genomes/fa3-bwd.toml --time anchors --json $R/gate.json
  run_logged baselines 120 python3 scripts/sdpa_backward_baseline.py --shapes "$(cat $X/anchors.json)" --backends cudnn,flash --cold-l2
  for tool in memcheck racecheck synccheck; do
    run_logged sanitize 60 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate genomes/fa3-bwd.toml --suite quick --drawn 0 --time none
  done
  run_logged search-d64 200 target/release/evo evolve --pass backward --problem 4,16,1024,1024,64,f16 --minutes 2.5 --experiment $R/search-d64
  ;;
s1)
  # A backward search at B2 H16 L4096 D128 from the named backward genomes.
  run_logged search-d128 260 target/release/evo evolve --pass backward --problem 2,16,4096,4096,128,f16 --minutes 3.5 --experiment $R/search-d128
  ;;
t1)
  # Training through the export with the searched backward genomes (fa3-bwd at D64, D96,
  # D128): experiments/2026-11-26-h100-training/run.sh (needs target/record/train/
  # {evo,libevo_runtime.so}.xz of this tree); then racecheck over fa3-bwd with one stage.
  OUT=$R bash experiments/2026-11-26-h100-training/run.sh > $R/training.txt 2>&1; echo "training: exit $?"
  run_logged sanitize-s1 60 compute-sanitizer --tool racecheck --error-exitcode 9 target/release/evo gate $X/fa3-bwd-s1.toml --suite quick --drawn 0 --time none
  ;;
t2)
  # evo bench --champions --backward: every class's backward genome against cuDNN and flash.
  run_logged bench 560 target/release/evo bench --champions genomes/champions/h100 --backward --cold-l2 --json $R/bench.json
  ;;
t3)
  # Which instructions racecheck names: the SASS of fa3-bwd-s1 (NVRTC 13.0, as the gate
  # builds it, at the quick suite's D64 f16 and D128 bf16) beside racecheck's offsets.
  for v in "64 f16" "128 bf16"; do
    read d t <<< "$v"
    python3 $X/cubin.py /usr/local/cuda/lib64/libnvrtc.so /usr/local/cuda/include $R/s1.cubin $(target/release/evo compile $X/fa3-bwd-s1.toml --head-dim $d --dtype $t --emit defines)
    { echo "== D$d $t"; cuobjdump -sass -fun evo_attention_bwd $R/s1.cubin; } >> $R/sass.txt 2>&1
    rm -f $R/s1.cubin
  done
  gzip -9 $R/sass.txt
  ;;
t4)
  # Every consumer thread arrives on the stage's q_empty (one arrival per warp before):
  # racecheck over fa3-bwd, then fa3-bwd through the gate at the anchors.
  run_logged sanitize 90 compute-sanitizer --tool racecheck --error-exitcode 9 target/release/evo gate genomes/fa3-bwd.toml --suite quick --drawn 0 --time none
  run_logged gate 200 target/release/evo gate genomes/fa3-bwd.toml --time anchors --json $R/gate.json
  gzip -9 $R/gate.json
  ;;
t5)
  # memcheck and synccheck over t4's fa3-bwd.
  for tool in memcheck synccheck; do
    run_logged sanitize 90 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate genomes/fa3-bwd.toml --suite quick --drawn 0 --time none
  done
  ;;
esac
grep -E "FAIL|backward warm|ERROR SUMMARY|RACECHECK SUMMARY" $R/*.txt | sed 's/^.*\.txt://' | tail -40
grep "sdpa backward cudnn {" $R/baselines.txt | cut -c1-150
cd $OUT && tar czf $1.tgz $1 && rm -rf $1
