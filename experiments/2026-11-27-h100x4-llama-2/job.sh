#!/bin/bash
# The whole run, started in the background by run.sh (it outlives one 10-minute call of
# the device): W is the run's folder, outside the repository copy it runs from.
#   1. `evo tune --model llama-3-8b` with 2k/4k/8k/32k prefills and the preset's four
#      decode points, 10 minutes a shape, on the host's four GPUs, seeded from a champions
#      table without the two Llama-3-8B classes the record has (as for a model evo never
#      searched), the cost model learning from the snapshot of the H100 records that
#      experiments/2026-11-27-h100x4-llama keeps (each search leaves its own shape out);
#      the tune then crowns its champions and benches them against PyTorch SDPA;
#   2. one bench, in the same run, of the tune's champions and today's on the two classes
#      the record shares.
set -u
W=$1
C=genomes/champions/h100
log() { echo "$(date -u +%FT%TZ) $*" >>"$W/job.log"; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64

mkdir -p "$W/tune"
python3 experiments/2026-11-26-h100-tune/drop_classes.py $C "$W/from" \
  b1-h32kv8-l4096-d128-causal b16-h32kv8-lq1-lk8192-d128-causal-br >"$W/tune/from.txt" 2>&1
log "tune"
started=$SECONDS
timeout 1620 target/release/evo tune --model llama-3-8b --prefill 2048,4096,8192,32768 \
  --minutes 10 --gpus 0,1,2,3 --from "$W/from" \
  --model-data experiments/2026-11-27-h100x4-llama/h100.snapshot.jsonl.gz \
  --out "$W/tune/tune" >"$W/tune/tune.txt" 2>&1
echo "exit $? after $((SECONDS - started)) s" >>"$W/tune/tune.txt"
log "tune: $(tail -1 "$W/tune/tune.txt")"

T=$W/tune/tune/champions
timeout 240 target/release/evo bench $T/b1-h32kv8-l4096-d128-causal.toml \
  $T/b16-h32kv8-lq1-lk8192-d128-causal-br.toml \
  $C/b1-h32kv8-l4096-d128-causal.toml $C/b16-h32kv8-lq1-lk8192-d128-causal-br.toml \
  --problem 1,32,4096,4096,128,f16,causal,kv=8 --problem 16,32,1,8192,128,f16,causal=br,kv=8 \
  --cold-l2 --json "$W/tune/compare.json" >"$W/tune/compare.txt" 2>&1
echo "exit $?" >>"$W/tune/compare.txt"
log "compare: $(tail -1 "$W/tune/compare.txt")"
touch "$W/done"
