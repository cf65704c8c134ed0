#!/bin/bash
# Run G6: more sampled backward genomes through GREEN, from fresh seeds (printed): G5
# gated 176 (56 Ampere, 120 Hopper); this adds Ampere ones for the rest of 300 and a few
# Hopper ones. Every verdict is a line of sample-*.txt.
# Needs target/record/evo.xz (`cargo build --release -p evo`).
# Usage (repository root): bash experiments/2026-11-26-h100-bwd-gate/run-g6.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g6; mkdir -p $R target/release
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/evo.xz target/release/evo && chmod +x target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "== $*" >> $R/$name.txt
  local t0=$(date +%s)
  timeout $limit "$@" >> $R/$name.txt 2>&1
  local rc=$?; echo "exit $rc after $(( $(date +%s) - t0 )) s" >> $R/$name.txt; echo "$name: exit $rc"
}
step sample-ampere 330 target/release/evo gate --sample 110 --family ampere_bwd --drawn 2 --time none --json $R/sample-ampere.json
step sample-hopper 60 target/release/evo gate --sample 30 --family hopper_bwd --drawn 2 --time none --json $R/sample-hopper.json
for f in $R/sample-*.txt; do echo "$f: $(grep -c ': GREEN (backward)' $f) genomes gated, $(grep -c ' pass$' $f) passing rows, $(grep -cE ' FAIL' $f) failing rows"; done
cd $OUT && tar czf g6.tgz g6 && rm -rf g6
