set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/r; mkdir -p $R/diag
export EVO=target/release/evo
bash scripts/gate_integrity_evidence.sh $R info adversarial
# diagnosis: the two sweeps of the last records stopped at one kernel each
for fam in hopper ampere; do
  if [ $fam = hopper ]; then a=(--sample 6 --family hopper --seed 2026 --time none); else a=(--sample 10 --seed 2027 --time seed); fi
  ( time $EVO gate "${a[@]}" --suite default --step-timeout 20 --save-samples $R/diag/$fam --json $R/diag/$fam.json ) > $R/diag/$fam.txt 2>&1
  echo "== diag $fam exit $?"; tail -4 $R/diag/$fam.txt
done
# search throughput, same device, same run: before (the commit before the hardened gates) and after
EVO=target/release/evo-before bash scripts/gate_integrity_evidence.sh $R/before evolve
bash scripts/gate_integrity_evidence.sh $R/after evolve
cd $OUT && tar czf r.tgz r && rm -rf r
