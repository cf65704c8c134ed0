# Run P6: why a later run in one process is slower (P4, P5). As fresh programs, probe5.c
# (non-causal seed row, FAST's graph method, plain replays) with the champion's module
# loaded again 0, 1 or 3 times first (reinit), and after 0 or 5 s of back-to-back replays
# (busy); then in one Python process (probe9.py): runs back to back and after host sleeps.
# nvidia-smi samples clocks, temperature and power every 100 ms throughout.
# Needs target/record/evo and target/record/libevo_runtime.so (built from the commit that
# adds this script). From the repository root: bash experiments/2026-11-25-h100-export-probe/run-p6.sh
# Output: $OUT/p6.tgz (p6/summary.txt holds every figure).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
OUT=${OUT:-/tmp/evo-p6-out}
R=$OUT/p6; mkdir -p $R
E=target/record/evo
C=genomes/champions/h100
P=experiments/2026-11-25-h100-export-probe
X=$(mktemp -d /tmp/evo-p6-export-XXXXXX)
S=$R/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/info.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_event_reasons.active --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
$E export $X --champions $C --cubin --lib target/record/libevo_runtime.so > $R/export.txt 2>&1; echo "export exit $?"
cc -O2 -shared -fPIC -DPROBE5_LIBRARY $P/probe5.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -lm -Wl,-rpath,$X/lib -o $X/libprobe5.so > $R/cc.txt 2>&1; echo "cc lib exit $?"
cc -O2 $P/probe5.c -I $X/include -I /usr/local/cuda/include -L $X/lib -levo_runtime \
  -L /usr/local/cuda/lib64/stubs -lcuda -lm -Wl,-rpath,$X/lib -o $X/probe5 >> $R/cc.txt 2>&1; echo "cc exit $?"
for pass in 1 2; do for reinit in 0 1 3; do for busy in 0 5; do
  echo "$(date -u +%T) program reinit=$reinit busy=$busy" >> $R/marks.txt
  timeout 60 $X/probe5 $X 0 3 0 0 0 $reinit $busy > $R/probe5-p$pass-r$reinit-b$busy.txt 2>&1
  grep "P2 C-ABI" $R/probe5-p$pass-r$reinit-b$busy.txt | sed "s/^/program pass $pass: /" >> $S
done; done; done
echo "$(date -u +%T) probe9" >> $R/marks.txt
timeout 200 python3 $P/probe9.py $X $X/libprobe5.so 0,0,0,s5,0,0,s10,0,3 --rounds 3 > $R/probe9.txt 2>&1; echo "probe9 exit $?"
grep -E "^t=|^slept|P2 C-ABI" $R/probe9.txt | sed 's/ (median over.*per call)//' >> $S
kill $SMI
rm -rf $X
python3 - $R/smi.csv >> $S <<'PY'
import sys, csv
rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0][:2] == "20"]
clk = sorted(int(r[1].split()[0]) for r in rows)
print(f"nvidia-smi: {len(rows)} samples; SM clock min {clk[0]} median {clk[len(clk)//2]} max {clk[-1]} MHz; "
      f"temperature {min(int(r[3]) for r in rows)}-{max(int(r[3]) for r in rows)} C; "
      f"power {min(float(r[4].split()[0]) for r in rows):.0f}-{max(float(r[4].split()[0]) for r in rows):.0f} W; "
      f"samples below 1980 MHz: {sum(c < 1980 for c in clk)}")
PY
cat $S
cd $OUT && tar czf p6.tgz p6 && rm -rf p6
