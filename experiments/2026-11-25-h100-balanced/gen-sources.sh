# Writes sources/: the two L1024 champions as hand-written kernels (kernels/ABI.md) from
# three versions of the Hopper template, for run B2's A/B:
#   old    - the template at REV (before balanced blocks)
#   new    - kernels/attention_sm90.cu as it stands
#   noidle - the same with the idle warpgroups' skip compiled out
# Each file: the genome's defines (`evo compile --emit defines`) less the head dim and
# dtype, which the host passes per variant, and with the shared memory taken from the
# template's own plan; then mask.cuh, the template and combine.cuh, as the host joins
# them. The causal champion's three stages do not fit D128's shared memory, so its
# source uses two there (GREEN also runs D128 cases; the timed shape is D64).
# Usage (repository root): bash experiments/2026-11-25-h100-balanced/gen-sources.sh REV
set -eu
X=experiments/2026-11-25-h100-balanced
rev=$1
mkdir -p $X/sources
t=$(mktemp -d)
git show $rev:kernels/attention_sm90.cu > $t/old.cu
cp kernels/attention_sm90.cu $t/new.cu
sed 's/const bool idle = c.wg_row0 >= w.row_end;/const bool idle = false;/' kernels/attention_sm90.cu > $t/noidle.cu
grep -q "const bool idle = false;" $t/noidle.cu
for g in b4-h16-l1024-d64 b4-h16-l1024-d64-causal; do
  defs=$(target/release/evo compile genomes/champions/h100/$g.toml --emit defines |
    grep -v -e EVO_HEAD_DIM -e EVO_BF16 -e EVO_SMEM_BYTES |
    sed 's/^-D\([A-Z0-9_]*\)=\(.*\)$/#define \1 \2/')
  [ $g = b4-h16-l1024-d64-causal ] && defs=$(echo "$defs" | sed 's/^#define EVO_STAGES 3$/#define EVO_STAGES (EVO_HEAD_DIM == 128 ? 2 : 3)/')
  for v in old new noidle; do
    {
      echo "// $v template, genome genomes/champions/h100/$g.toml (gen-sources.sh)"
      echo "$defs"
      echo "#define EVO_SMEM_BYTES (evo::kSmemTotal)"
      cat kernels/mask.cuh
      echo '#line 1 "kernels/attention_sm90.cu"'
      cat $t/$v.cu
      echo '#line 1 "kernels/combine.cuh"'
      cat kernels/combine.cuh
    } > $X/sources/$v-$g.cu
  done
done
rm -r $t
