#!/bin/bash
# On a host of four GPUs: `bash experiments/2026-11-27-h100x4-llama-2/run.sh start`, then
# `run.sh wait` in the next calls until it prints "done". `start` copies the repository
# to the run's folder W ($HOME/evo-x4), unpacks target/record/evo.xz (`cargo build
# --release -p evo`, xz-compressed) and starts job.sh in a session of its own; each call
# then waits up to WAIT seconds (default 560) and leaves the run's folder so far in
# $OUT/x4.tgz.
set -u
W=${W:-$HOME/evo-x4}
D=experiments/2026-11-27-h100x4-llama-2
case ${1:?usage: run.sh start|wait} in
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
*) echo "usage: run.sh start|wait" >&2; exit 2 ;;
esac
deadline=$((SECONDS + ${WAIT:-560}))
snapshot() { tar czf "$OUT/x4.tgz.part" -C "$W" --exclude=repo . && mv "$OUT/x4.tgz.part" "$OUT/x4.tgz"; }
while [ ! -e "$W/done" ] && [ $SECONDS -lt $deadline ]; do
  sleep 20
  snapshot
done
snapshot
cat "$W/job.log"
grep -h "^\[" "$W/tune/tune.txt" 2>/dev/null | tail -20
[ -e "$W/done" ] && { tail -45 "$W/tune/tune.txt"; tail -25 "$W/tune/compare.txt"; echo done; }
exit 0
