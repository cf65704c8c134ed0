#!/usr/bin/env python3
"""ptxas regs/spills: base template vs current, register-path configs (sm_90)."""
import sys, os, json, itertools
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nvrtc_compile as nc
from multiprocessing import Pool
FA2 = dict(HEAD_DIM=128,BF16=0,QK_MATH=2,PV_MATH=2,P_REGS=1,O_REGS=1,BLOCK_M=64,BLOCK_N=64,WARPS=4,
           PRODUCER_WARPS=0,CP_ASYNC=1,STAGES=2,SMEM_LAYOUT=2,VEC_BYTES=16,EXP2=1,SPLIT_KV=1,MIN_BLOCKS=1)
base = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_base.cu")).read()
cur = open(nc.SRC).read()
jobs = []
for D in (64, 128):
  for bm, w in ((16,1),(32,2),(64,4),(128,4),(128,8),(64,2)):
    for bn in (32, 64, 128):
      for mb, cap, o in ((1,0,1),(2,0,1),(1,128,1),(1,0,0)):
        g = dict(FA2, HEAD_DIM=D, BLOCK_M=bm, WARPS=w, BLOCK_N=bn, MIN_BLOCKS=mb, MAX_REGS=cap, O_REGS=o)
        if nc.valid(g): jobs.append(g)
def f(g):
    out = []
    for src in (base, cur):
        r, log = nc.compile_src(src, nc.options(g, "sm_90", extra=["-DEVO_MAX_REGS=%d" % g["MAX_REGS"]]))
        p = nc.parse(log).get("evo_attention_fwd", {})
        out.append((r, p.get("regs"), p.get("spill_st", 0) + p.get("stack", 0)))
    return g, out
with Pool(2) as pool:
    for g, ((r0, g0, s0), (r1, g1, s1)) in pool.imap(f, jobs):
        flag = "  <-- SPILL" if s1 > s0 else ""
        print("D%d bm%d w%d bn%d mb%d cap%d O%d: base rc%d %s regs sp%s | new rc%d %s regs sp%s%s" % (
            g["HEAD_DIM"], g["BLOCK_M"], g["WARPS"], g["BLOCK_N"], g["MIN_BLOCKS"], g["MAX_REGS"], g["O_REGS"], r0, g0, s0, r1, g1, s1, flag), flush=True)
