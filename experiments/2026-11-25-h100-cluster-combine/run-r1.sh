# Run R1: the record of every class in genomes/champions/h100 after run S2's two seed-shape
# champions (both with the cluster merge): the models-2 folder's record script, unchanged
# (`evo bench --champions genomes/champions/h100 --record --cold-l2`, f16, SDPA beside each,
# warm and on a cold L2, rewriting dispatch.toml and the champions' headers, brought back
# in champions/; then the same champions in bf16 without SDPA), on the binary of the
# commit that adds this script. Needs target/record/evo.gz.
# Usage (repository root): bash experiments/2026-11-25-h100-cluster-combine/run-r1.sh
# Output: $OUT/r1.tgz.
set -u
gunzip -c target/record/evo.gz > target/record/evo && chmod +x target/record/evo
bash experiments/2026-11-25-h100-models-2/run-r1.sh
