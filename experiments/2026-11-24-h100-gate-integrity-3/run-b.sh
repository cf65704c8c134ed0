# Run B: the 200-evaluation seed-shape GPU search, the binary before this change
# (target/evo-before, main at 226bc3e) and after it (target/release/evo), alternating,
# two of each, same command otherwise. Output under $OUT/r (tarred).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
for run in before-1 after-1 before-2 after-2; do
  case $run in before*) E=target/evo-before ;; *) E=target/release/evo ;; esac
  rm -rf /tmp/$run
  start=$(date +%s.%N)
  echo "== $E evolve --backend gpu --strategy evolutionary --budget 200 --seed 1 --experiment $run --quiet" > $R/$run.txt
  EVO_LOG=evo_gates=debug timeout 140 $E evolve --backend gpu --strategy evolutionary --budget 200 --seed 1 --experiment /tmp/$run --quiet >> $R/$run.txt 2>$R/$run.log
  rc=$?
  end=$(date +%s.%N)
  wall=$(python3 -c "print(f'{$end-$start:.1f}')")
  n=$(grep -c . /tmp/$run/evaluations.jsonl 2>/dev/null)
  echo "RESULT $run exit $rc wall ${wall} s evaluations $n per-minute $(python3 -c "print(f'{$n/($end-$start)*60:.1f}')")" | tee -a $R/summary.txt
  cp /tmp/$run/evaluations.jsonl $R/$run.evaluations.jsonl 2>/dev/null
  cp /tmp/$run/report.md $R/$run.report.md 2>/dev/null
done
gzip $R/*.log
cd $OUT && tar czf r.tgz r && rm -rf r
