#!/usr/bin/env python3
"""Run D17: does cuDNN's graph-replay figure for the grouped decode depend on what the SDPA
script ran before it in the same process? scripts/sdpa_baseline.py (as `evo bench` runs
it: one process, every shape) over the 13 champion classes of
genomes/champions/h100/dispatch.toml in the table's order, then over the grouped decode
alone, twice each, printing cuDNN's and flash's warm and cold figures for the decode."""
import json, subprocess, sys, tomllib

table = tomllib.load(open("genomes/champions/h100/dispatch.toml", "rb"))


def problem(spec):
    f = spec.split(",")
    p = {"batch": int(f[0]), "heads": int(f[1]), "q_len": int(f[2]), "kv_len": int(f[3]),
         "head_dim": int(f[4]), "dtype": f[5], "causal": False}
    for x in f[6:]:
        if x == "causal":
            p["causal"] = True
        elif x == "causal=br":
            p["causal"], p["align"] = True, "bottom_right"
        elif x.startswith("kv="):
            p["kv_heads"] = int(x[3:])
        elif x.startswith("window="):
            left, right = x[7:].split(":")
            if left:
                p["window_left"] = int(left)
            if right:
                p["window_right"] = int(right)
    return p


shapes = [problem(c["shape"]) for c in table["class"]]
decode = problem("16,32,1,8192,128,f16,causal=br,kv=8")
for rep in (1, 2):
    for label, sh in (("all 13 classes, table order", shapes), ("the grouped decode alone", [decode])):
        out = subprocess.run([sys.executable, "scripts/sdpa_baseline.py", "--shapes", json.dumps(sh),
                              "--seed", "2026", "--cold-l2"], capture_output=True, text=True)
        rows = json.loads(out.stdout.strip().splitlines()[-1])
        got = {(r["backend"], r.get("timing")): r["median_us"] for r in rows if r["problem"] == decode}
        print(f"pass {rep}, {label}: " + ", ".join(f"{b} {t} {v:.1f}" for (b, t), v in sorted(got.items())
                                                  if v is not None and b in ("cudnn", "flash")), flush=True)
