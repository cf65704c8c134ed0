#!/bin/bash
# Run T2: GREEN (default suite, 8 drawn shapes) over sample/: 40 Hopper genomes that passed
# GREEN in earlier searches, each with `o_store = "tma"` and one split
# (`draw_sample.py 40 sample`: one per distinct epilogue shape, checked by `evo compile` at
# D64 and D128). Needs target/record/evo.xz built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-26-h100-o-tma/run-t2.sh
# Output: $OUT/t2.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-o-tma
R=$OUT/t2; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo gate sample/*.toml --time none --drawn 8 --seed 2026112603 --json sample.json" > $R/sample.txt
timeout 540 $E gate $X/sample/*.toml --time none --drawn 8 --seed 2026112603 --json $R/sample.json >> $R/sample.txt 2>&1
echo "sample exit $?"; grep -E "kernels passed|kernels failed|FAIL" $R/sample.txt | head -8; tail -2 $R/sample.txt
gzip -9 $R/sample.json
cd $OUT && tar czf t2.tgz t2 && rm -rf t2
