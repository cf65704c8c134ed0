# Run C4: GREEN now runs each case's second launch of a persistent kernel on 1 to 3
# CTAs (crates/gates/src/green.rs, persistent_grid_of). The named genomes, the H100
# champions and this folder's genomes through it, fresh seed. Output: $OUT/c4.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
unset EVO_PERSISTENT_GRID
R=$OUT/c4; mkdir -p $R
E=target/record/evo
K="$(ls genomes/*.toml) $(ls genomes/champions/h100/*.toml | grep -v dispatch.toml) $(ls experiments/2026-11-25-h100-chained/genomes/*.toml)"
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo "== evo gate <named, champions, chained> --suite default --time none --seed $seed" > $R/green.txt
echo $K >> $R/green.txt
timeout 240 $E gate $K --suite default --time none --seed $seed >> $R/green.txt 2>&1; echo "green exit $?"
grep -E "^FAIL|passed GREEN|failed:" $R/green.txt | cut -c1-300 | head -8
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
