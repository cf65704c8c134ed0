#!/bin/bash
# Run G5: (1) both backward genomes through GREEN and FAST on the anchors, with FAST's
# cold pass drawing inputs of its own (first GPU run of that change); (2) sampled
# backward genomes of each family through GREEN (a fresh seed each, printed), as many
# as the time allows: every verdict is a line of sample-*.txt.
# Needs target/record/evo.xz (`cargo build --release -p evo`).
# Usage (repository root): bash experiments/2026-11-26-h100-bwd-gate/run-g5.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g5; mkdir -p $R target/release
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$1.xz $2 && chmod +x $2; }
unxz evo target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  local t0=$(date +%s)
  PYTHONUNBUFFERED=1 timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc after $(( $(date +%s) - t0 )) s" >> $R/$name.txt; echo "$name: exit $rc ($*)"
}
step anchors 200 target/release/evo gate genomes/fa2-bwd.toml genomes/fa3-bwd.toml --time anchors --json $R/anchors.json
step sample-ampere 170 target/release/evo gate --sample 150 --family ampere_bwd --drawn 2 --time none --json $R/sample-ampere.json
step sample-hopper 170 target/release/evo gate --sample 150 --family hopper_bwd --drawn 2 --time none --json $R/sample-hopper.json
for f in $R/sample-*.txt; do echo "$f: $(grep -c ': GREEN (backward)' $f) genomes gated, $(grep -cE ' FAIL' $f) failing rows"; done
grep -E "FAST|µs|cold" $R/anchors.txt | tail -20
cd $OUT && tar czf g5.tgz g5 && rm -rf g5
