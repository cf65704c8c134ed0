# Run S6: a search per models-suite row (issue 18), so that each row has a champion of
# its own class in genomes/champions/h100: `evo evolve --backend gpu --problem SPEC
# --minutes M`, both families, fresh seed, generation 0 seeded with the row's best
# kernels so far (seeds-ROW/: the screening grids of experiments/2026-11-25-h100-decode
# and -headdims, and the D128 champions). Timed by FAST with L2 read over (D4).
# Usage (repository root): bash experiments/2026-11-25-h100-models-2/run-s6.sh PART MINUTES ROW...
#   ROW: prefill, decode, window, mqa, d256, d96
# Output: $OUT/s6-PART.tgz (the search folders, their logs).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
part=$1; minutes=$2; shift 2
X=experiments/2026-11-25-h100-models-2
R=$OUT/s6-$part; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
for row in "$@"; do
  case $row in
    prefill) P=1,32,4096,4096,128,f16,causal,kv=8 ;;
    decode) P=16,32,1,8192,128,f16,causal=br,kv=8 ;;
    window) P=1,32,8192,8192,128,f16,causal,kv=8,window=4096: ;;
    mqa) P=16,32,1,8192,128,f16,causal=br,kv=1 ;;
    d256) P=1,16,4096,4096,256,f16,causal,kv=8 ;;
    d96) P=1,32,4096,4096,96,f16,causal ;;
    *) echo "unknown row $row"; exit 2 ;;
  esac
  echo "== evo evolve --backend gpu --problem $P --minutes $minutes --genomes $X/seeds-$row --experiment search-$row --quiet" > $R/search-$row.txt
  timeout $(( ${minutes%.*} * 60 + 100 )) $E evolve --backend gpu --problem $P --minutes $minutes --genomes $X/seeds-$row \
    --experiment $R/search-$row --quiet >> $R/search-$row.txt 2>&1; echo "search $row exit $?"
  tail -3 $R/search-$row.txt
done
gzip -9 $R/search-*/lineage.json 2>/dev/null
cd $OUT && tar czf s6-$part.tgz s6-$part && rm -rf s6-$part
