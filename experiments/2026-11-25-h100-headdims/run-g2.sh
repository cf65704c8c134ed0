# Run G2: run G1's GREEN over the named genomes, the H100 champions and the variants of
# genomes/ (G1's glob took dispatch.toml for a genome), then GREEN over 100 sampled
# Ampere genomes, both on the default suite with a fresh seed. Output: $OUT/g2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/g2; mkdir -p $R
E=target/record/evo
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
G=experiments/2026-11-25-h100-headdims/genomes
echo "== evo gate genomes/*.toml genomes/champions/h100/b*.toml $G/*.toml --suite default --time none --json green.json" > $R/green.txt
timeout 330 $E gate genomes/*.toml genomes/champions/h100/b*.toml $G/*.toml --suite default --time none --json $R/green.json >> $R/green.txt 2>&1; echo "green exit $?"
grep -E "FAIL|error" $R/green.txt | head -20; tail -1 $R/green.txt
echo "== EVO_PERSISTENT_GRID=7 evo gate --sample 100 --family ampere --suite default --time none --json sample-ampere.json" > $R/sample-ampere.txt
EVO_PERSISTENT_GRID=7 timeout 220 $E gate --sample 100 --family ampere --suite default --time none --json $R/sample-ampere.json >> $R/sample-ampere.txt 2>&1; echo "sample ampere exit $?"
grep -E "FAIL|error" $R/sample-ampere.txt | head -10; tail -1 $R/sample-ampere.txt
gzip -9 $R/*.json
cd $OUT && tar czf g2.tgz g2 && rm -rf g2
