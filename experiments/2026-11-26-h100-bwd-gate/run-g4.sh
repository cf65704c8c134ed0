#!/bin/bash
# Run G4, the session's last: (1) the hand-written backward kernels and their
# verdicts; (2) a backward search on the GPU; (3) the export with the lse twins
# (EVO_LSE=1 builds of the champions) and its backward: scripts/backward_check.py and the
# training run of experiments/2026-11-26-h100-training. Needs target/record/evo.xz and
# target/record/libevo_runtime.so.xz (`cargo build --release -p evo -p evo-runtime` at the
# commit that adds this script).
# Usage (repository root): bash experiments/2026-11-26-h100-bwd-gate/run-g4.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g4; mkdir -p $R target/release
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$1.xz $2 && chmod +x $2; }
unxz evo target/release/evo; unxz libevo_runtime.so target/release/libevo_runtime.so
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc" >> $R/$name.txt; echo "$name: exit $rc ($*)"
}
srcs=(); for f in tests/kernels/bwd_*.cu; do srcs+=(--source "$f"); done
step gate 150 target/release/evo gate "${srcs[@]}" --drawn 3 --time seed --json $R/gate.json
step verdicts 30 python3 scripts/check_verdicts.py $R/gate.json tests/kernels
step search 110 target/release/evo evolve --pass backward --problem 4,16,1024,1024,64,f16 --minutes 1.5 --experiment $R/search
EXPORT=$(mktemp -d)/h100
step export 60 target/release/evo export $EXPORT --champions genomes/champions/h100 --cubin --lib target/release/libevo_runtime.so
step backward-check 40 python3 scripts/backward_check.py $EXPORT --json $R/backward_check.json
step train 90 python3 scripts/train_gpt.py $EXPORT --steps 300 --evo-runs 2 --torch-runs 3 --json $R/train.json
grep -E "^ok|^BAD|exit" $R/*.txt | tail -30
tail -12 $R/search.txt; tail -8 $R/backward-check.txt; grep -A8 "max |loss" $R/train.txt
cd $OUT && tar czf g4.tgz g4 && rm -rf g4
