#!/bin/bash
# Run L3: the forward champions' speed with the lse output compiled in but not asked for,
# against the binary of the commit before it (9960fc2), alternating, two rounds each:
# `evo bench --champions genomes/champions/h100 --no-sdpa` (every champion on its own
# shape, warm and cold L2). The old binary reads the table without its [[backward]]
# entries, which it does not know. Needs target/record/evo.xz (this commit) and
# target/record/evo-head.xz (`cargo build --release -p evo` at 9960fc2).
# Usage (repository root): bash experiments/2026-11-26-h100-forward-lse/run-l3.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$OUT/l3; mkdir -p $R target/release
T=$(mktemp -d)   # the two binaries and the old binary's copy of the table
unxz() { python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" target/record/$1.xz $2 && chmod +x $2; }
unxz evo $T/evo-new; unxz evo-head $T/evo-old
rm -rf $T/old-champs && cp -r genomes/champions/h100 $T/old-champs && rm -rf $T/old-champs/backward
python3 - $T/old-champs/dispatch.toml <<'PY'
import sys
p = sys.argv[1]; t = open(p).read()
i = t.find("\n[[backward]]")
open(p, "w").write(t if i < 0 else t[:i] + "\n")
PY
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; } > $R/info.txt 2>&1
for round in 1 2; do
  for which in old new; do
    champs=genomes/champions/h100; [ $which = old ] && champs=$T/old-champs
    timeout 140 $T/evo-$which bench --champions $champs --no-sdpa --cold-l2 --json $R/$which-$round.json > $R/$which-$round.txt 2>&1
    echo "$which round $round: exit $?"
  done
done
python3 - $R <<'PY'
import json, sys, glob, statistics
R = sys.argv[1]
rows = {}
for f in sorted(glob.glob(R + "/*-*.json")):
    which = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f)):
        if r.get("kernel", "").startswith(("cublas", "sdpa")) or r.get("median_us") is None:
            continue
        key = (r["kernel"], r.get("shape"), r.get("method"))
        rows.setdefault(key, {}).setdefault(which, []).append(r["median_us"])
print("kernel | shape | timing | old µs (2 rounds) | new µs (2 rounds) | new/old (median of rounds)")
for k, v in sorted(rows.items(), key=lambda kv: str(kv[0])):
    o, n = v.get("old", []), v.get("new", [])
    if o and n:
        print(f"{k[0][:48]} | {k[1]} | {k[2]} | {', '.join(f'{x:.2f}' for x in o)} | {', '.join(f'{x:.2f}' for x in n)} | {statistics.median(n)/statistics.median(o):.3f}")
PY
