#!/usr/bin/env python3
"""Correctness list: named seeds (genomes/*.toml at D64/D128 x f16/bf16), the 17 math/residence
paths x N random, and M uniformly random valid genomes.  usage: lists.py N_PER_PATH M SEED OUT"""
import json, random, sys, os, glob, tomllib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvrtc_compile as nc
from sweep import SPACE
import make_genomes as mg
MATH = {"scalar": 0, "wmma": 1, "mma": 2}
def toml_genome(path, D, bf):
    t = tomllib.load(open(path, "rb"))["genes"]
    g = dict(HEAD_DIM=D, BF16=bf, QK_MATH=MATH[t["qk_math"]], PV_MATH=MATH[t["pv_math"]],
             P_REGS=int(t["p_path"] == "regs"), O_REGS=int(t["o_accum"] == "regs"), BLOCK_M=t["block_m"],
             BLOCK_N=t["block_n"], WARPS=t["warps"], PRODUCER_WARPS=t["producer_warps"],
             CP_ASYNC=int(t["kv_load"] == "cp_async"), STAGES=t["stages"],
             SMEM_LAYOUT={"plain": 0, "padded": 1, "swizzled": 2}[t["smem_layout"]], VEC_BYTES=t["vec_bytes"],
             EXP2=int(t["exp"] == "exp2"), SPLIT_KV=t["split_kv"], MIN_BLOCKS=t["min_blocks"])
    if t["reg_cap"] != "none": g["MAX_REGS"] = int(t["reg_cap"])
    assert nc.valid(g), (path, g)
    return g
n_pp, m, seed, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
gl = [toml_genome(p, D, bf) for p in sorted(glob.glob("genomes/*.toml")) for D in (64, 128) for bf in (0, 1)]
ns = len(gl)
rng = random.Random(seed)
for (qk, pv, pr, orr) in mg.PATHS:
    got = 0
    while got < n_pp:
        g = {k: rng.choice(v) for k, v in SPACE.items()}
        g.update(QK_MATH=qk, PV_MATH=pv, P_REGS=pr, O_REGS=orr)
        if not nc.valid(g): continue
        gl.append(g); got += 1
seen = set(json.dumps(g, sort_keys=True) for g in gl)
got = 0
while got < m:
    g = {k: rng.choice(v) for k, v in SPACE.items()}
    if rng.random() < 0.15: g["MAX_REGS"] = rng.choice([96, 128, 168])
    if not nc.valid(g): continue
    k = json.dumps(g, sort_keys=True)
    if k in seen: continue
    seen.add(k); gl.append(g); got += 1
json.dump(gl, open(out, "w"))
print(len(gl), "genomes:", ns, "named seeds,", len(mg.PATHS), "paths x", n_pp, ",", m, "random ->", out)
