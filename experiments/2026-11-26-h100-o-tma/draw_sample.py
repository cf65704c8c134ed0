#!/usr/bin/env python3
"""Draws the O-by-TMA sample of run T1: Hopper genomes that passed GREEN in earlier
searches (every anchors and models row), each with `o_store = "tma"` and one split, kept
when `evo compile` (the genome's rules, then NVRTC and ptxas for sm_90a) accepts it at
D64 and at D128, one per distinct shape of the genes that decide the epilogue's path
(tile, warpgroups, stages, persistent, overlap, producer, packing), in a seeded order.
Usage (repository root): python3 experiments/2026-11-26-h100-o-tma/draw_sample.py N OUT_DIR"""
import glob, gzip, json, os, random, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

n, out = int(sys.argv[1]), sys.argv[2]
evo = os.environ.get("EVO", "target/release/evo")
seen, pool = set(), []
# The pool: the searches of 2026-11-25 and the long searches S1-S8 (T2's 40 were drawn while
# S5-S8 were not all in the tree yet; its sample/ files are the record of that draw).
paths = glob.glob("experiments/2026-11-25-*/**/evaluations.jsonl.gz", recursive=True)
paths += glob.glob("experiments/2026-11-26-h100-long-searches/s[1-8]/**/evaluations.jsonl.gz",
                   recursive=True)
for path in sorted(paths):
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


# The pool's order decides which genomes are kept; the checks run in parallel batches.
kept, workers = [], os.cpu_count() or 1
with ThreadPoolExecutor(workers) as ex:
    for start in range(0, len(pool), 2 * workers):
        batch = pool[start:start + 2 * workers]
        kept += [g for g, ok in zip(batch, ex.map(compiles, batch)) if ok]
        if len(kept) >= n:
            break
for i, g in enumerate(kept[:n]):
    with open(os.path.join(out, f"tma-sample-{i:03d}.toml"), "w") as f:
        f.write(f'name = "tma-sample-{i:03d}"\n\n[genes]\n{genes(g)}')
print(f"{min(n, len(kept))} genomes from a pool of {len(pool)} distinct shapes")
