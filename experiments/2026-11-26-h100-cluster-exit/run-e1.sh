#!/bin/bash
# Run E1: the cluster merge's exit (every thread of a cluster-merge kernel ends on a second
# phase of the cluster barrier, `evo_cluster::leave`). (1) GREEN with a fresh seed on the two seed-row champions (cluster merges) and
# four twins (rows and keys splits, one tile per CTA and persistent), on the default suite
# with 8 drawn shapes and on suite.toml (uneven splits: one CTA of a cluster with one key
# or none); (2) memcheck, racecheck and synccheck on suite.toml; (3) the seed-row
# champions timed by the binary before the change and after it, alternately, three runs
# each, warm and cold L2.
# Needs target/record/{evo,evo-before}.xz: `cargo build --release` at
# the commit that adds this script, and at a167beb (the kernel before `leave`).
# Usage (repository root): bash experiments/2026-11-26-h100-cluster-exit/run-e1.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=experiments/2026-11-26-h100-cluster-exit
R=$OUT/e1; mkdir -p $R target/release
for f in evo evo-before; do
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$f.xz target/release/$f
  chmod +x target/release/$f
done
E=target/release/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > $R/info.txt 2>&1
G="genomes/champions/h100/b1-h8-l512-d64.toml genomes/champions/h100/b1-h8-l512-d64-causal.toml $D/genomes/*.toml"
seed=$(date +%s%N | cut -c1-16)
{ echo "== evo gate $G --time none --drawn 8 --seed $seed"
  timeout 150 $E gate $G --time none --drawn 8 --seed $seed; echo "exit $?"
  echo "== evo gate $G --time none --suite $D/suite.toml --drawn 0 --seed $seed"
  timeout 60 $E gate $G --time none --suite $D/suite.toml --drawn 0 --seed $seed; echo "exit $?"; } > $R/green.txt 2>&1
grep -E "^== |exit |kernels passed|kernels failed" $R/green.txt
for tool in memcheck racecheck synccheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  { echo "== compute-sanitizer --tool $tool $extra evo gate $G --suite $D/suite.toml --drawn 0 --time none"
    timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
      $E gate $G --suite $D/suite.toml --drawn 0 --time none --seed $seed; echo "exit $?"; } > $R/$tool.txt 2>&1
  echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kernels passed|kernels failed|^exit" $R/$tool.txt | tr '\n' ' ')"
done
C="genomes/champions/h100/b1-h8-l512-d64.toml genomes/champions/h100/b1-h8-l512-d64-causal.toml"
for i in 1 2 3; do
  for b in evo-before evo; do
    echo "== run $i: $b bench $C --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa --cold-l2" >> $R/bench.txt
    timeout 60 target/release/$b bench $C --problem 1,8,512,512,64,f16 --problem 1,8,512,512,64,f16,causal --no-sdpa --cold-l2 >> $R/bench.txt 2>&1
  done
done
cd $OUT && tar czf e1.tgz e1 && rm -rf e1
