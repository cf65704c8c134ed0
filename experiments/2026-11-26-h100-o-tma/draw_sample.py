#!/usr/bin/env python3
"""Draws the O-by-TMA sample of run T1: Hopper genomes that passed GREEN in earlier
searches (every anchors and models row), each with `o_store = "tma"` and one split, kept
when `evo compile` (the genome's rules, then NVRTC and ptxas for sm_90a) accepts it at
D64 and at D128, one per distinct shape of the genes that decide the epilogue's path
(tile, warpgroups, stages, persistent, overlap, producer, packing), in a seeded order.
Usage (repository root): python3 experiments/2026-11-26-h100-o-tma/draw_sample.py N OUT_DIR"""
import glob, gzip, json, os, random, subprocess, sys, tempfile

n, out = int(sys.argv[1]), sys.argv[2]
evo = os.environ.get("EVO", "target/release/evo")
seen, pool = set(), []
for path in sorted(glob.glob("experiments/2026-11-2[56]-*/**/evaluations.jsonl.gz", recursive=True)):
    for line in gzip.open(path, "rt"):
        e = json.loads(line)["evaluation"]
        g = e["genome"]
        if e["status"] != "ok" or g.get("family") != "hopper":
            continue
        g = dict(g, o_store="tma", split_kv=1, cluster_combine="off")
        key = tuple(g.get(k) for k in ("block_n", "consumer_wgs", "stages", "persistent",
                                        "softmax_overlap", "hopper_load", "producer_regs",
                                        "pingpong", "pack_gqa"))
        if key not in seen:
            seen.add(key)
            pool.append(g)
random.Random(20261126).shuffle(pool)
os.makedirs(out, exist_ok=True)
kept = 0
for g in pool:
    if kept == n:
        break
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in g.items())
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(f'name = "tma-sample-{kept:03d}"\n\n[genes]\n{body}')
    ok = all(subprocess.run([evo, "compile", f.name, "--head-dim", d, "--emit", "report"],
                            capture_output=True).returncode == 0 for d in ("64", "128"))
    if ok:
        os.replace(f.name, os.path.join(out, f"tma-sample-{kept:03d}.toml"))
        kept += 1
    else:
        os.unlink(f.name)
print(f"{kept} genomes from a pool of {len(pool)} distinct shapes")
