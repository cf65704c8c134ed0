#!/usr/bin/env python3
"""Draws the keys-split sample of run D14: Hopper genomes that passed GREEN in earlier
searches (every anchors and models row), each turned into a `wg_split = "keys"` kernel the
rules accept (two or three consumer warpgroups, stages a multiple of them, overlap not
chained), kept when `evo compile` (rules, NVRTC, ptxas for sm_90a) accepts it at D64 and
D128, one per distinct shape of the genes the split touches, in a seeded order.
Usage (repository root): python3 experiments/2026-11-26-h100-decode-3/draw_keys.py N OUT_DIR"""
import glob, gzip, json, os, random, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

n, out = int(sys.argv[1]), sys.argv[2]
evo = os.environ.get("EVO", "target/release/evo")
rng = random.Random(20261126)
seen, pool = set(), []
paths = sorted(glob.glob("experiments/2026-11-2[56]-*/**/evaluations.jsonl.gz", recursive=True))
for path in paths:
    for line in gzip.open(path, "rt"):
        e = json.loads(line)["evaluation"]
        g = e["genome"]
        if e["status"] != "ok" or g.get("family") != "hopper":
            continue
        wgs = g.get("consumer_wgs", 2)
        wgs = wgs if wgs > 1 else rng.choice([2, 3])
        stages = g.get("stages", 2)
        stages = stages if stages % wgs == 0 else (2 * rng.choice([1, 2]) if wgs == 2 else 3)
        overlap = g.get("softmax_overlap", "off")
        g = dict(g, wg_split="keys", consumer_wgs=wgs, stages=stages,
                 softmax_overlap="on" if overlap == "chained" else overlap)
        key = tuple(str(g.get(k)) for k in ("block_n", "consumer_wgs", "stages", "persistent",
                                             "softmax_overlap", "pingpong", "split_kv",
                                             "cluster_combine", "o_store", "pack_gqa"))
        if key not in seen:
            seen.add(key)
            pool.append(g)
rng.shuffle(pool)
os.makedirs(out, exist_ok=True)


def genes(g):
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in g.items())


def compiles(g):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(f'name = "candidate"\n\n[genes]\n{genes(g)}')
    try:
        return all(subprocess.run([evo, "compile", f.name, "--head-dim", d, "--emit", "report"],
                                  capture_output=True).returncode == 0 for d in ("64", "128"))
    finally:
        os.unlink(f.name)


kept, workers = [], os.cpu_count() or 1
with ThreadPoolExecutor(workers) as ex:
    for start in range(0, len(pool), 2 * workers):
        batch = pool[start:start + 2 * workers]
        kept += [g for g, ok in zip(batch, ex.map(compiles, batch)) if ok]
        if len(kept) >= n:
            break
for i, g in enumerate(kept[:n]):
    with open(os.path.join(out, f"keys-sample-{i:03d}.toml"), "w") as f:
        f.write(f'name = "keys-sample-{i:03d}"\n\n[genes]\n{genes(g)}')
print(f"{min(n, len(kept))} of a pool of {len(pool)} written to {out}")
