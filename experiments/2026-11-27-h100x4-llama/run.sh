#!/bin/bash
# On a host of four GPUs: `bash experiments/2026-11-27-h100x4-llama/run.sh start`, then
# `run.sh wait` in the next calls until it prints "done". `start` copies the repository
# to the run's folder W ($HOME/evo-x4), unpacks target/record/evo.xz (`cargo build
# --release -p evo`, xz-compressed) and starts job.sh in a session of its own; each call
# then waits up to WAIT seconds (default 560) and leaves the run's folder so far in
# $OUT/x4.tgz. `run.sh compare` (run X1's last call, on the same host) crowns the two
# searches of the classes the record shares and benches them beside today's champions,
# the step job.sh could not reach when its tune's champions step failed.
set -u
W=${W:-$HOME/evo-x4}
D=experiments/2026-11-27-h100x4-llama
case ${1:?usage: run.sh start|wait|compare} in
start)
  mkdir -p "$W" && cp -a . "$W/repo" && cd "$W/repo" && mkdir -p target/release || exit 1
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
    target/record/evo.xz target/release/evo && chmod +x target/release/evo
  { date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
    echo "cores: $(nproc)"
    python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
  } >"$W/info.txt" 2>&1
  setsid nohup bash $D/job.sh "$W" >"$W/job.out" 2>&1 </dev/null &
  ;;
wait) ;;
compare)
  cd "$W/repo" && export LD_LIBRARY_PATH=/usr/local/cuda/lib64 || exit 1
  S=$W/tune/tune/searches E=target/release/evo C=genomes/champions/h100
  date -u >"$OUT/info.txt"
  $E champions $S/b1-h32kv8-l4096-d128-causal-f16 $S/b16-h32kv8-lq1-lk8192-d128-causal-br-f16 \
    --out "$W/c2" >"$OUT/champ.txt" 2>&1
  timeout 140 $E bench "$W/c2/b1-h32kv8-l4096-d128-causal.toml" \
    "$W/c2/b16-h32kv8-lq1-lk8192-d128-causal-br.toml" \
    $C/b1-h32kv8-l4096-d128-causal.toml $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml \
    --problem 1,32,4096,4096,128,f16,causal,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=8 \
    --cold-l2 --json "$OUT/compare.json" >"$OUT/compare.txt" 2>&1
  echo "exit $?" >>"$OUT/compare.txt"
  cp -r "$W/c2" "$OUT/"
  tail -30 "$OUT/compare.txt"
  exit 0
  ;;
*) echo "usage: run.sh start|wait|compare" >&2; exit 2 ;;
esac
deadline=$((SECONDS + ${WAIT:-560}))
snapshot() { tar czf "$OUT/x4.tgz.part" -C "$W" --exclude=repo . && mv "$OUT/x4.tgz.part" "$OUT/x4.tgz"; }
while [ ! -e "$W/done" ] && [ $SECONDS -lt $deadline ]; do
  sleep 20
  snapshot
done
snapshot
cat "$W/job.log"
grep -h "^\[" "$W/tune/tune.txt" 2>/dev/null
[ -e "$W/done" ] && { tail -40 "$W/tune/tune.txt"; tail -25 "$W/tune/compare.txt"; tail -8 "$W/steady.txt"; echo done; }
