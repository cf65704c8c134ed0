#!/bin/bash
# Run G3: both backward families through evo's gates, PyTorch's backward beside them, the
# sanitizers on the Hopper family, and the forward champions' speed with the lse output
# compiled out (EVO_LSE=0) against the commit before it.
# 1. `evo gate genomes/fa2-bwd.toml genomes/fa3-bwd.toml --time anchors` (GREEN backward on
#    the default suite + drawn shapes, FAST backward on the seven anchors shapes);
# 2. scripts/sdpa_backward_baseline.py on the same shapes (cuDNN, flash; graph and cold L2);
# 3. compute-sanitizer memcheck, racecheck and synccheck over `evo gate genomes/fa3-bwd.toml
#    --suite quick --drawn 0 --time none`;
# 4. experiments/2026-11-26-h100-forward-lse/run-l3.sh's comparison again (run L4).
# Needs target/record/evo.xz (this commit) and target/record/evo-head.xz (9960fc2).
# Usage (repository root): bash experiments/2026-11-26-h100-bwd-gate/run-g3.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g3; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc" >> $R/$name.txt; echo "$name: exit $rc ($*)"
}
step gate 260 target/release/evo gate genomes/fa2-bwd.toml genomes/fa3-bwd.toml --time anchors --json $R/gate.json
S='[{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":false},
{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":true},
{"batch":4,"heads":16,"q_len":1024,"kv_len":1024,"head_dim":64,"dtype":"f16","causal":false},
{"batch":4,"heads":16,"q_len":1024,"kv_len":1024,"head_dim":64,"dtype":"f16","causal":true},
{"batch":2,"heads":16,"q_len":4096,"kv_len":4096,"head_dim":128,"dtype":"f16","causal":false},
{"batch":2,"heads":16,"q_len":4096,"kv_len":4096,"head_dim":128,"dtype":"f16","causal":true},
{"batch":1,"heads":16,"q_len":8192,"kv_len":8192,"head_dim":128,"dtype":"f16","causal":false}]'
step baselines 120 python3 scripts/sdpa_backward_baseline.py --shapes "$S" --backends cudnn,flash --cold-l2
for tool in memcheck racecheck synccheck; do
  step sanitize 60 compute-sanitizer --tool $tool --error-exitcode 9 target/release/evo gate genomes/fa3-bwd.toml --suite quick --drawn 0 --time none
done
OUT=$R bash experiments/2026-11-26-h100-forward-lse/run-l3.sh > $R/l4.txt 2>&1; echo "l4: exit $?"
mv $R/l3 $R/l4 2>/dev/null; rm -f $R/l4/*.txt
grep -E "FAIL|backward warm|exit|ERROR SUMMARY|RACECHECK SUMMARY" $R/*.txt | tail -40
tail -32 $R/l4.txt
cd $OUT && tar czf g3.tgz g3 && rm -rf g3
