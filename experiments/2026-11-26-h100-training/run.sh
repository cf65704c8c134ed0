#!/bin/bash
# The training run: export the recorded champions with their backward kernels, check
# evo's gradients against torch SDPA's (scripts/backward_check.py), then train the small
# GPT with evo's attention and with torch SDPA (scripts/train_gpt.py). Needs
# target/record/train/{evo,libevo_runtime.so}.xz: `cargo build --release` and `cargo build
# --release -p evo-runtime` of this tree, each compressed with python3's lzma.
# Usage (repository root): bash experiments/2026-11-26-h100-training/run.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/training; mkdir -p $R target/release
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/train/$1.xz $2 && chmod +x $2; }
unxz evo target/release/evo; unxz libevo_runtime.so target/release/libevo_runtime.so
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > $R/info.txt 2>&1
EXPORT=$(mktemp -d)/h100
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc" >> $R/$name.txt; echo "$name: exit $rc"
}
step export 90 target/release/evo export $EXPORT --champions genomes/champions/h100 --cubin --lib target/release/libevo_runtime.so
step backward-check 60 python3 scripts/backward_check.py $EXPORT --json $R/backward_check.json
tail -15 $R/backward-check.txt
step train 120 python3 scripts/train_gpt.py $EXPORT --steps 300 --evo-runs 2 --torch-runs 3 --json $R/train.json
grep -A30 "max |loss" $R/train.txt
