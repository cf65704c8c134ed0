set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R/champions
E=target/release/evo
start=$SECONDS
for spec in 1,8,512,512,64,f16 1,8,512,512,64,f16,causal 4,16,1024,1024,64,f16 4,16,1024,1024,64,f16,causal 2,16,4096,4096,128,f16 2,16,4096,4096,128,f16,causal 1,16,8192,8192,128,f16; do
  slug=$(echo $spec | tr ',' '-')
  echo "== $E evolve --backend gpu --problem $spec --minutes 1.0 --seed 1 --experiment RESULTS/champions/$slug --quiet (at $((SECONDS-start)) s)"
  timeout 150 $E evolve --backend gpu --problem $spec --minutes 1.0 --seed 1 --experiment $R/champions/$slug --quiet > $R/champions/$slug.txt 2>&1
  echo "exit $?"; grep -E "^[0-9]+ evaluations|^champion|^  " $R/champions/$slug.txt | head -4
done
cd $OUT && tar czf r.tgz r && rm -rf r
