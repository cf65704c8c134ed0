#!/bin/bash
# Run T1: O stored by the copy engine (`o_store = "tma"`). (1) GREEN with 8 drawn shapes on
# candidates/ (eight champions with O stored by TMA, and the Llama-prefill champion chained
# across its tiles with it); (2) compute-sanitizer memcheck and racecheck over
# tests/sanitize/suite.toml on five of them (persistent, one tile per CTA, chained, D96's
# clipped pad, packed decode); (3) each champion against its TMA twin, one `evo bench
# --cold-l2` per row (no SDPA: the two kernels are the comparison); (4) the grouped decode
# champion and five twins against SDPA; (5) the L8192 champion and SDPA in f16 and bf16,
# the SM clock and power sampled meanwhile.
# Needs target/record/evo.xz built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-26-h100-o-tma/run-t1.sh
# Output: $OUT/t1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-o-tma
C=genomes/champions/h100
R=$OUT/t1; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo gate candidates/*.toml --time none --drawn 8 --seed 2026112602 --json green.json" > $R/green.txt
timeout 150 $E gate $X/candidates/*.toml --time none --drawn 8 --seed 2026112602 --json $R/green.json >> $R/green.txt 2>&1
echo "green exit $?"; grep -E "kernels passed|kernels failed|FAIL" $R/green.txt | head -5
S="$X/candidates/b4-h16-l1024-d64-tma.toml $X/candidates/b2-h16-l4096-d128-causal-tma.toml
   $X/candidates/b1-h32kv8-l4096-d128-causal-chained-tma.toml $X/candidates/b1-h32-l4096-d96-causal-tma.toml
   $X/candidates/b16-h32kv8-lq1-lk8192-d128-causal-br-tma.toml"
for tool in memcheck racecheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
  echo "== compute-sanitizer --tool $tool $extra evo gate <5 candidates> --suite tests/sanitize/suite.toml --drawn 0 --time none" > $R/$tool.log
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool $extra --report-api-errors no --error-exitcode 3 --print-limit 20 \
    $E gate $S --suite tests/sanitize/suite.toml --drawn 0 --time none >> $R/$tool.log 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|kernels passed|kernels failed" $R/$tool.log | tail -2
done
bench() {  # class problem
  echo "== evo bench $C/$1.toml candidates/$1-tma.toml --problem $2 --cold-l2 --no-sdpa --json bench-$1.json" > $R/bench-$1.txt
  timeout 100 $E bench $C/$1.toml $X/candidates/$1-tma.toml --problem $2 --cold-l2 --no-sdpa --json $R/bench-$1.json >> $R/bench-$1.txt 2>&1
  echo "bench $1 exit $?"; grep -E "^(champion|$1-tma)" $R/bench-$1.txt | grep -v "not built" | cut -c1-110
}
bench b4-h16-l1024-d64 4,16,1024,1024,64,f16
bench b4-h16-l1024-d64-causal 4,16,1024,1024,64,f16,causal
bench b2-h16-l4096-d128-causal 2,16,4096,4096,128,f16,causal
bench b1-h32kv8-l4096-d128-causal 1,32,4096,4096,128,f16,causal,kv=8
bench b1-h32kv8-l8192-d128-causal-wl4096 1,32,8192,8192,128,f16,causal,kv=8,window=4096:
bench b1-h32-l4096-d96-causal 1,32,4096,4096,96,f16,causal
bench b1-h16kv8-l4096-d256-causal 1,16,4096,4096,256,f16,causal,kv=8
bench b16-h32kv8-lq1-lk8192-d128-causal-br 16,32,1,8192,128,f16,causal=br,kv=8
# The grouped decode row against SDPA (flash is the fastest there): its champion and five
# twins with more concurrency (two splits merged in a cluster) or wider tiles.
echo "== evo bench $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml decode/*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=8 --cold-l2 --json bench-decode.json" > $R/bench-decode.txt
timeout 120 $E bench $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml $X/decode/*.toml --problem 16,32,1,8192,128,f16,causal=br,kv=8 \
  --cold-l2 --json $R/bench-decode.json >> $R/bench-decode.txt 2>&1; echo "bench decode exit $?"
python3 scripts/bench_best.py $R/bench-decode.json --top 3
# bf16 against f16 on the L8192 row with SDPA in both, SM clock and power sampled every
# 100 ms meanwhile: does cuDNN gain in bf16 what the champion gains?
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 > $R/clocks.csv 2>&1 &
smi=$!
echo "== evo bench $C/b1-h16-l8192-d128.toml --problem 1,16,8192,8192,128,f16 --problem 1,16,8192,8192,128,bf16 --cold-l2 --json bench-dtype.json" > $R/bench-dtype.txt
timeout 150 $E bench $C/b1-h16-l8192-d128.toml --problem 1,16,8192,8192,128,f16 --problem 1,16,8192,8192,128,bf16 \
  --cold-l2 --json $R/bench-dtype.json >> $R/bench-dtype.txt 2>&1; echo "bench dtype exit $?"
kill $smi
python3 scripts/bench_best.py $R/bench-dtype.json
mkdir -p $R/bench; mv $R/bench-* $R/bench/; gzip -9 $R/clocks.csv
cd $OUT && tar czf t1.tgz t1 && rm -rf t1
