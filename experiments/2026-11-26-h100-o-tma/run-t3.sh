#!/bin/bash
# Run T3: GREEN (default suite, 8 drawn shapes) over sample300/: 300 Hopper genomes that
# passed GREEN in earlier searches, each with `o_store = "tma"` and one split
# (`draw_sample.py 300 sample300`: one per distinct epilogue shape, checked by `evo compile`
# at D64 and D128). Needs target/record/evo.xz built from the commit that adds this script.
# Usage (repository root): bash experiments/2026-11-26-h100-o-tma/run-t3.sh
# Output: $OUT/t3.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
X=experiments/2026-11-26-h100-o-tma
R=$OUT/t3; mkdir -p $R
E=target/record/evo
python3 -c "import lzma;open('$E','wb').write(lzma.open('$E.xz').read())" && chmod +x $E
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/info.txt 2>&1
echo "== evo gate sample300/*.toml --time none --drawn 8 --seed 2026112604 --json sample300.json" > $R/sample300.txt
timeout 330 $E gate $X/sample300/*.toml --time none --drawn 8 --seed 2026112604 --json $R/sample300.json >> $R/sample300.txt 2>&1
echo "sample300 exit $?"; grep -E "kernels passed|kernels failed|FAIL" $R/sample300.txt | head -8
gzip -9 $R/sample300.json
cd $OUT && tar czf t3.tgz t3 && rm -rf t3
