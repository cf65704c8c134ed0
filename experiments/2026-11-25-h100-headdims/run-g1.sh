# Run G1: head dims 96 and 256 (issue 18) on the H100. GREEN (default suite: every
# problem kind, now with four D96/D256 cases, plus 8 drawn shapes, two of them at D96 and
# D256; fresh seed) over the named genomes, the H100 champions and the variants of
# genomes/ (Hopper: D96 loaders, persistent, pack, split, tile shapes; D256 128 x 80 and
# the other tiles that fit; Ampere: fa2 with one or two genes changed); then GREEN over
# 100 sampled Hopper genomes. Output: $OUT/g1.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g1; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
G=experiments/2026-11-25-h100-headdims/genomes
echo "== evo gate genomes/*.toml genomes/champions/h100/*.toml $G/*.toml --suite default --time none --json green.json" > $R/green.txt
timeout 330 $E gate genomes/*.toml genomes/champions/h100/*.toml $G/*.toml --suite default --time none --json $R/green.json >> $R/green.txt 2>&1; echo "green exit $?"
grep -E "FAIL|error|SKIPPED" $R/green.txt | grep -v "invalid at\|first ABI" | head -20; tail -2 $R/green.txt
echo "== EVO_PERSISTENT_GRID=7 evo gate --sample 100 --family hopper --suite default --time none --json sample-hopper.json" > $R/sample-hopper.txt
EVO_PERSISTENT_GRID=7 timeout 220 $E gate --sample 100 --family hopper --suite default --time none --json $R/sample-hopper.json >> $R/sample-hopper.txt 2>&1; echo "sample hopper exit $?"
grep -E "FAIL|error" $R/sample-hopper.txt | head -10; tail -1 $R/sample-hopper.txt
gzip -9 $R/*.json
cd $OUT && tar czf g1.tgz g1 && rm -rf g1
