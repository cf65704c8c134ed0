#!/usr/bin/env python3
"""Enumerate valid genomes, sample, compile for sm_90/sm_89 in parallel, report failures/spills."""
import itertools, random, sys, json, os
from multiprocessing import Pool
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvrtc_compile as nc
SPACE = dict(HEAD_DIM=[64,128],BF16=[0,1],QK_MATH=[0,1,2],PV_MATH=[0,1,2],P_REGS=[0,1],O_REGS=[0,1],
  BLOCK_M=[16,32,64,128],BLOCK_N=[16,32,64,128],WARPS=[1,2,4,8],PRODUCER_WARPS=[0,1,2],CP_ASYNC=[0,1],
  STAGES=[1,2,3,4],SMEM_LAYOUT=[0,1,2],VEC_BYTES=[4,8,16],EXP2=[0,1],SPLIT_KV=[1,2,4,8],MIN_BLOCKS=[1,2,3,4])
SRC = open(nc.SRC).read()
def all_valid(limit):
    keys = list(SPACE)
    for vals in itertools.product(*SPACE.values()):
        g = dict(zip(keys, vals))
        if nc.valid(g, limit): yield g
def job(a):
    g, arch = a
    res, log, p = nc.compile_genome(g, arch, SRC)
    f = p.get("evo_attention_fwd", {})
    return g, arch, res, (log if res else ""), f
if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rng = random.Random(seed)
    # reservoir-free: sample by drawing random genomes until valid
    keys = list(SPACE); jobs = []
    seen = set()
    while len(jobs) < n:
        g = {k: rng.choice(v) for k, v in SPACE.items()}
        arch = rng.choice(["sm_90", "sm_89"])
        lim = 227*1024 if arch == "sm_90" else 99*1024
        if not nc.valid(g, lim): continue
        key = (tuple(g.values()), arch)
        if key in seen: continue
        seen.add(key); jobs.append((g, arch))
    fails = 0; spills = 0
    with Pool(os.cpu_count()) as pool:
        for g, arch, res, log, f in pool.imap_unordered(job, jobs):
            if res:
                fails += 1
                print("FAIL", arch, json.dumps(g)); print(log[-3000:])
            elif f.get("spill_st", 0) or f.get("stack", 0):
                spills += 1
                if "-v" in sys.argv: print("spill", arch, f, json.dumps(g))
    print(f"compiled {len(jobs)}: {fails} failures, {spills} with stack/spills")
