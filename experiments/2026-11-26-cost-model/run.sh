#!/usr/bin/env bash
# The cost model's record. CPU only: replays of the recorded two-family landscape
# (B1 H8 L512 D64 f16, H100) and the records under experiments/.
#  0. The snapshot of what the model learns from (every H100 forward record under
#     experiments/ when it was made, each genome once per shape at its median) and how
#     well a forest trained on the other shapes ranks each shape held out.
#  a. The guided strategy against the evolutionary and random ones, 50 seeds each, the
#     model trained on the snapshot without the landscape's shape;
#  b. also without the causal twin of that shape;
#  c. also without every other D64 shape: the model has seen only D96, D128 and D256;
#  d. the steady-state searches beside them (see the last command).
set -euo pipefail
evo=${EVO:-target/release/evo}
out=experiments/2026-11-26-cost-model
snap=$out/h100.snapshot.jsonl.gz
# The snapshot is made once (a later run would take in records made since); the
# held-out table is of the snapshot.
[ -e $snap ] || $evo model --device "NVIDIA H100 80GB HBM3" --snapshot $snap --min-rows 1000000
$evo model --model-data $snap > $out/model.txt
$evo strategies --guided --model-data $snap --seeds 50 --checkpoints 25,50,100,200 \
  --json $out/a.json --force > $out/a.txt
$evo strategies --guided --model-data $snap --seeds 50 --checkpoints 25,50,100,200 \
  --leave-out 1,8,512,512,64,f16,causal --json $out/b.json --force > $out/b.txt
$evo strategies --guided --model-data $snap --seeds 50 --checkpoints 25,50,100,200 \
  --leave-out 1,8,512,512,64,f16,causal --leave-out 4,16,1024,1024,64,f16 \
  --leave-out 4,16,1024,1024,64,f16,causal --json $out/c.json --force > $out/c.txt
#  d. (added after a-c) the steady-state search with the model, 1 and 21 in flight.
$evo strategies --guided --steady --in-flight 1,21 --model-data $snap --seeds 50 \
  --checkpoints 25,50,100 --json $out/d.json --force > $out/d.txt
