#!/usr/bin/env bash
# Submit an island-model search to Slurm: a job array with one island per task and one
# GPU per task, then `evo merge` as a job that starts once every island has ended.
#
#   scripts/slurm/submit.sh [--islands N] [--run DIR] [--cpus C] [--no-gpu] [-- EVOLVE_OPTIONS...]
#
#   --islands N   islands, one array task each [4]
#   --run DIR     folder on a filesystem every node shares: island-K/ (each island's
#                 experiment), exchange/ (the elites they trade), merged/, slurm/ (logs)
#                 [experiments/<date>-islands]
#   --cpus C      CPUs per island, for the parallel compile pipeline [8]
#   --no-gpu      drop --gpus-per-task=1, for a replay backend on a cluster without GPUs
#                 (a test of the machinery, not a search)
#   EVOLVE_OPTIONS go to every `evo evolve`, e.g. -- --budget 400 --population 16
#
# Run it from the repository root, after `cargo build --release` (or set EVO to the
# binary). A requeued or resubmitted island resumes its experiment; nothing measured
# is lost.
set -euo pipefail

islands=4
run="experiments/$(date -u +%F)-islands"
cpus=8
gpu=(--gpus-per-task=1)
while [ $# -gt 0 ]; do
  case "$1" in
    --islands) islands=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --no-gpu) gpu=(); shift ;;
    --) shift; break ;;
    *) echo "submit.sh: unknown option \`$1\`; the header of $0 lists the options" >&2; exit 2 ;;
  esac
done
if ! command -v sbatch >/dev/null; then
  echo "submit.sh: sbatch not found: run this on a Slurm login node" >&2
  exit 1
fi
if [ "$islands" -lt 2 ]; then
  echo "submit.sh: --islands $islands: an island model needs at least 2" >&2
  exit 2
fi
evo=${EVO:-target/release/evo}
if [ ! -x "$evo" ]; then
  echo "submit.sh: $evo not found: run \`cargo build --release\` first, or set EVO to the evo binary" >&2
  exit 1
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$run/slurm"

export EVO="$evo" EVO_RUN="$run" EVO_ISLANDS="$islands" EVO_ARGS="$*"
array=$(sbatch --parsable --chdir="$PWD" --array="0-$((islands - 1))" --cpus-per-task="$cpus" \
  "${gpu[@]}" --output="$run/slurm/island-%a.out" "$here/island.sbatch")
merge=$(sbatch --parsable --chdir="$PWD" --dependency="afterany:$array" \
  --output="$run/slurm/merge.out" "$here/merge.sbatch")
echo "islands: job $array (array 0-$((islands - 1)))"
echo "merge:   job $merge, after every island; writes $run/merged"
