#!/bin/bash
# Run G1: the backward through evo's own gates. GREEN (backward) on fa2-bwd over the
# default suite and 6 shapes drawn from a fresh seed, then FAST (backward) on the anchors
# shapes; PyTorch's cuDNN and flash backward on the same shapes in the same run; synccheck
# over the quick suite. Needs target/record/evo.xz (`cargo build --release -p evo` at the
# commit that adds this script).
# Usage (repository root): bash experiments/2026-11-26-h100-bwd-gate/run-g1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g1; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc" >> $R/$name.txt; echo "$name: exit $rc ($*)"
}
step gate 330 target/release/evo gate genomes/fa2-bwd.toml --time anchors --json $R/gate.json
S='[{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":false},
{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":true},
{"batch":4,"heads":16,"q_len":1024,"kv_len":1024,"head_dim":64,"dtype":"f16","causal":false},
{"batch":4,"heads":16,"q_len":1024,"kv_len":1024,"head_dim":64,"dtype":"f16","causal":true},
{"batch":2,"heads":16,"q_len":4096,"kv_len":4096,"head_dim":128,"dtype":"f16","causal":false},
{"batch":2,"heads":16,"q_len":4096,"kv_len":4096,"head_dim":128,"dtype":"f16","causal":true},
{"batch":1,"heads":16,"q_len":8192,"kv_len":8192,"head_dim":128,"dtype":"f16","causal":false}]'
step baselines 150 python3 scripts/sdpa_backward_baseline.py --shapes "$S" --backends cudnn,flash --cold-l2
step synccheck 100 compute-sanitizer --tool synccheck --error-exitcode 9 target/release/evo gate genomes/fa2-bwd.toml --suite quick --drawn 0 --time none
grep -E "FAIL|backward warm|exit|ERROR SUMMARY" $R/*.txt | tail -40
