#!/bin/bash
# The whole run, started in the background by run.sh (it outlives one 10-minute call of
# the device): W is the run's folder, outside the repository copy it runs from.
#   1. the reference's chunked form against the loop (scripts/test_sdpa_baseline.py);
#   2. `evo tune --model llama-3-8b` with 2k/4k/8k/32k prefills and the preset's four
#      decode points, 10 minutes a shape, on the host's four GPUs, seeded from a champions
#      table without the two Llama-3-8B classes the record has (as for a model evo never
#      searched), the cost model learning from this folder's snapshot of the H100 records
#      (each search leaves its own shape out), then its bench against PyTorch SDPA;
#   3. one bench, in the same run, of the tune's champions and today's on those two classes;
#   4. one steady-state search at the seed shape on two of the host's GPUs and on one
#      (experiments/2026-11-26-h100x2-steady/run-s2.sh, 37 in flight for both: the count
#      the two-GPU evaluator picks on this host).
set -u
W=$1
D=experiments/2026-11-27-h100x4-llama
C=genomes/champions/h100
log() { echo "$(date -u +%FT%TZ) $*" >>"$W/job.log"; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64

log "reference test"
python3 scripts/test_sdpa_baseline.py >"$W/test_sdpa_baseline.txt" 2>&1
log "reference test: exit $?"

mkdir -p "$W/tune"
python3 experiments/2026-11-26-h100-tune/drop_classes.py $C "$W/from" \
  b1-h32kv8-l4096-d128-causal b16-h32kv8-lq1-lk8192-d128-causal-br >"$W/tune/from.txt" 2>&1
log "tune"
started=$SECONDS
timeout 1560 target/release/evo tune --model llama-3-8b --prefill 2048,4096,8192,32768 \
  --minutes 10 --gpus 0,1,2,3 --from "$W/from" --model-data $D/h100.snapshot.jsonl.gz \
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

log "steady"
OUT=$W RUN=steady IN_FLIGHT=37 bash experiments/2026-11-26-h100x2-steady/run-s2.sh \
  warmup:0,1:16 c2a:0,1:300 c1a:0:300 c1b:0:300 c2b:0,1:300 >"$W/steady.txt" 2>&1
log "steady: $(tail -1 "$W/steady.txt")"
touch "$W/done"
