# Run G3: the models suite (issue 18), f16, on the H100. First the SDPA baselines and fa3
# (`evo bench genomes/fa3.toml --suite models`), then the candidates without SDPA: the
# D128 champions, the decode grid's best (experiments/2026-11-25-h100-decode, run D1) and
# persistent decode variants, D256 tiles that fit (128 x 80 and others) and D96 tiles;
# then `evo bench --champions genomes/champions/h100 --record --cold-l2`, which rewrites
# the anchors figures in dispatch.toml and the champions' headers (brought back in
# champions/). Output: $OUT/g3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g3; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo bench genomes/fa3.toml --suite models --json sdpa.json" > $R/sdpa.txt
timeout 200 $E bench genomes/fa3.toml --suite models --json $R/sdpa.json >> $R/sdpa.txt 2>&1; echo "sdpa bench exit $?"
G=experiments/2026-11-25-h100-headdims/genomes; D=experiments/2026-11-25-h100-decode
K="genomes/champions/h100/b2-h16-l4096-d128.toml genomes/champions/h100/b1-h16-l8192-d128.toml genomes/champions/h100/b2-h16-l4096-d128-causal.toml
 $D/candidates/h-pack-c1-bn64-st2-s1.toml $D/candidates/h-pack-c1-bn64-st4-s4.toml $D/candidates/h-pack-c1-bn64-st2-s8.toml
 $D/candidates2/h-pack-c1-pers-bn64-st2-s2.toml $D/candidates2/h-pack-c1-pers-bn64-st2-s4.toml $D/candidates2/h-pack-c1-pers-bn64-st4-s4.toml $D/candidates2/h-pack-c1-pers-bn64-st4-s8.toml
 $G/h-d256-wg2-bn80.toml $G/h-d256-wg2-bn64-persist.toml $G/h-d256-wg1-bn80.toml $G/h-d256-wg2-bn96-s1.toml $G/h-d256-wg2-bn80-pack.toml
 $G/h-d96-persist.toml $G/h-d96-wg3-bn80.toml $G/h-d96-bn176.toml"
echo "== evo bench $K --suite models --no-sdpa --json kernels.json" > $R/kernels.txt
timeout 270 $E bench $K --suite models --no-sdpa --json $R/kernels.json >> $R/kernels.txt 2>&1; echo "kernels bench exit $?"
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
rows = json.load(open(f"{r}/sdpa.json")) + json.load(open(f"{r}/kernels.json"))
json.dump(rows, open(f"{r}/models.json", "w"), indent=1)
PY
python3 scripts/bench_best.py $R/models.json --top 3 > $R/models_best.txt 2>&1; cat $R/models_best.txt
echo "== evo bench --champions genomes/champions/h100 --record --cold-l2 --json record.json" > $R/record.txt
timeout 100 $E bench --champions genomes/champions/h100 --record --cold-l2 --json $R/record.json >> $R/record.txt 2>&1; echo "record exit $?"
mkdir -p $R/champions && cp genomes/champions/h100/* $R/champions/
gzip -9 $R/*.json
cd $OUT && tar czf g3.tgz g3 && rm -rf g3
