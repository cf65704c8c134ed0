#!/bin/bash
# Run E2: racecheck, one kernel a process, on the four cluster twins (E1's racecheck of all
# six in one process stopped at keys-cluster-persistent: no result after 120 s), and the
# persistent keys twin under the binary before `leave` too: is the stop the change's, or
# racecheck's with a persistent cluster grid?
# Needs target/record/{evo,evo-before}.xz as run-e1.sh.
# Usage (repository root): bash experiments/2026-11-26-h100-cluster-exit/run-e2.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=experiments/2026-11-26-h100-cluster-exit
R=$OUT/e2; mkdir -p $R target/release
for f in evo evo-before; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
run() {  # binary genome
  local log=$R/$1-$(basename $2 .toml).txt
  echo "== compute-sanitizer --tool racecheck --racecheck-report all $1 gate $2 --suite $D/suite.toml --drawn 0 --time none --step-timeout 60" > $log
  timeout 80 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --racecheck-report all --report-api-errors no --error-exitcode 3 --print-limit 20 \
    target/release/$1 gate $2 --suite $D/suite.toml --drawn 0 --time none --step-timeout 60 --seed 7 >> $log 2>&1
  echo "exit $?" >> $log
  echo "$1 $(basename $2): $(grep -E "RACECHECK SUMMARY|kernels passed|kernels failed|TIMEOUT|^exit" $log | cut -c1-120 | tr '\n' ' ')"
}
run evo-before $D/genomes/keys-cluster-persistent.toml
run evo $D/genomes/keys-cluster-persistent.toml
run evo $D/genomes/rows-cluster-persistent.toml
run evo $D/genomes/keys-cluster.toml
run evo $D/genomes/rows-cluster.toml
cd $OUT && tar czf e2.tgz e2 && rm -rf e2
