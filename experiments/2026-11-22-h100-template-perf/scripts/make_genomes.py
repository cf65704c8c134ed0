#!/usr/bin/env python3
"""Build a GPU test list: every math/residence path x random other genes, plus named seeds."""
import json, random, sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvrtc_compile as nc
from sweep import SPACE
PATHS = [(2,2,1,1),(2,2,1,0)] + [(qk,pv,0,o) for qk in (0,1,2) for pv in (0,1,2) for o in (0,1) if not (o and pv==1)]
def seeds():
    base = dict(HEAD_DIM=128,BF16=0,QK_MATH=2,PV_MATH=2,P_REGS=1,O_REGS=1,BLOCK_M=64,BLOCK_N=64,WARPS=4,
                PRODUCER_WARPS=0,CP_ASYNC=1,STAGES=2,SMEM_LAYOUT=2,VEC_BYTES=16,EXP2=1,SPLIT_KV=1,MIN_BLOCKS=1)
    out = []
    for D in (64,128):
        for bf in (0,1):
            fa2 = dict(base, HEAD_DIM=D, BF16=bf); out.append(fa2)
            out.append(dict(fa2, BLOCK_M=128, WARPS=4, BLOCK_N=32 if D==128 else 64, STAGES=3, SPLIT_KV=2))
            v3 = dict(base, HEAD_DIM=D, BF16=bf, QK_MATH=0, PV_MATH=0, P_REGS=0, O_REGS=0, BLOCK_M=32, BLOCK_N=32,
                      CP_ASYNC=0, STAGES=1, SMEM_LAYOUT=0, VEC_BYTES=16, EXP2=0); out.append(v3)
            v5 = dict(v3, QK_MATH=1); out.append(v5)
            v6a = dict(v5, PV_MATH=1, BLOCK_M=64); out.append(v6a)
            v7a = dict(v6a, CP_ASYNC=1, PRODUCER_WARPS=1, STAGES=2); out.append(v7a)
    return out
def main(n_per_path, seed, out):
    rng = random.Random(seed); gl = seeds()
    for (qk,pv,pr,orr) in PATHS:
        got = 0
        while got < n_per_path:
            g = {k: rng.choice(v) for k, v in SPACE.items()}
            g.update(QK_MATH=qk, PV_MATH=pv, P_REGS=pr, O_REGS=orr)
            g["MIN_BLOCKS"] = rng.choice([1,1,1,2])
            if not nc.valid(g, 227*1024): continue
            gl.append(g); got += 1
    json.dump(gl, open(out, "w"))
    print(len(gl), "genomes ->", out)
if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
