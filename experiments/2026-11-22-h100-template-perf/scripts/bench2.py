#!/usr/bin/env python3
"""Graph-timed sweep: template genomes (base vs current attention.cu) vs PyTorch SDPA (cuDNN, flash).
usage: bench2.py OUTDIR BUDGET_S"""
import json, math, os, sys, time, itertools
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, os.path.join(HERE, ".."))
from nvrtc_compile import KEYS, smem_bytes, valid
from gpu_harness import INC
import torch, cupy
from multiprocessing import Pool
T0 = time.time()
OUT = sys.argv[1]; BUDGET = float(sys.argv[2])
SRCS = {"base": open(os.path.join(HERE, "attention_base.cu")).read(),
        "new": open(os.environ.get("EVO_TEMPLATE", "kernels/attention.cu")).read()}
FA2 = dict(HEAD_DIM=64,BF16=0,QK_MATH=2,PV_MATH=2,P_REGS=1,O_REGS=1,BLOCK_M=64,BLOCK_N=64,WARPS=4,
           PRODUCER_WARPS=0,CP_ASYNC=1,STAGES=2,SMEM_LAYOUT=2,VEC_BYTES=16,EXP2=1,SPLIT_KV=1,MIN_BLOCKS=1)
def opts(g):
    return tuple("-DEVO_%s=%d" % (k, g[k]) for k in KEYS) + ("-DEVO_SMEM_BYTES=%d" % smem_bytes(g), "--std=c++17",
            "-DEVO_MAX_REGS=%d" % g.get("MAX_REGS", 0)) + INC
def name(g):
    return "bm%d w%d bn%d st%d sp%d mb%d%s" % (g["BLOCK_M"], g["WARPS"], g["BLOCK_N"], g["STAGES"], g["SPLIT_KV"], g["MIN_BLOCKS"],
            "" if g["O_REGS"] else " Osmem")
# ---- candidate lists per shape group
seed = []
for (bm, w) in ((16, 1), (32, 1), (32, 2), (64, 2), (64, 4), (128, 4), (128, 8)):
    for bn in (32, 64, 128):
        for st in (2, 3):
            for sp in (1, 2, 4):
                g = dict(FA2, BLOCK_M=bm, WARPS=w, BLOCK_N=bn, STAGES=st, SPLIT_KV=sp)
                if valid(g) and not (bm == 128 and sp > 1): seed.append(g)
big64 = []; big128 = []
for (bm, w) in ((64, 4), (128, 4), (128, 8), (64, 2)):
    for bn in (32, 64, 128):
        for st in (2, 3):
            for mb in (1, 2):
                g = dict(FA2, BLOCK_M=bm, WARPS=w, BLOCK_N=bn, STAGES=st, MIN_BLOCKS=mb)
                if valid(g) and not (mb == 2 and (bm, w) != (64, 4)): big64.append(g)
                g = dict(g, HEAD_DIM=128)
                if valid(g) and not (mb == 2 and (bm, w) != (64, 4)): big128.append(g)
# (B, H, L, D, causal, candidates, calls per graph, replays)
SHAPES = [(1, 8, 512, 64, 0, seed, 20, 30), (1, 8, 512, 64, 1, seed, 20, 30),
          (4, 16, 1024, 64, 0, big64, 10, 20), (4, 16, 1024, 64, 1, big64, 10, 20),
          (2, 16, 4096, 128, 0, big128, 3, 10), (2, 16, 4096, 128, 1, big128, 3, 10)]
def _pre(a):
    src, g = a
    try:
        cupy.RawModule(code=src, options=opts(g), backend="nvrtc").get_function("evo_attention_fwd"); return None
    except Exception as e:
        return repr(e)[:300]
if __name__ == "__main__":
    allg = {json.dumps(g, sort_keys=True): g for s in SHAPES for g in s[5]}
    with Pool(15) as pool:
        errs = pool.map(_pre, [(src, g) for src in SRCS.values() for g in allg.values()])
    print("precompiled %d in %.0fs, %d errors" % (len(errs), time.time() - T0, sum(e is not None for e in errs)), flush=True)
    dev = torch.device("cuda")
    mods = {}
    def fn(tag, g):
        key = (tag, json.dumps(g, sort_keys=True))
        if key not in mods:
            m = cupy.RawModule(code=SRCS[tag], options=opts(g), backend="nvrtc")
            f = m.get_function("evo_attention_fwd"); c = m.get_function("evo_attention_combine")
            sm = smem_bytes(g)
            if sm > 48 * 1024: f.max_dynamic_shared_size_bytes = sm
            mods[key] = (f, c, sm)
        return mods[key]
    def gtime(launch, calls, reps):
        """median µs per call of `calls` launches captured in a CUDA graph, replayed `reps` times"""
        launch(); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls): launch()
        g.replay(); torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
            s.record(); g.replay(); e.record(); e.synchronize()
            ts.append(s.elapsed_time(e) * 1000 / calls)
        ts.sort(); return ts[len(ts) // 2]
    rows = []
    fout = open(os.path.join(OUT, "bench.jsonl"), "w")
    summary = []
    for (B, H, L, D, causal, cands, calls, reps) in SHAPES:
        if time.time() - T0 > BUDGET: print("BUDGET: skipping", B, H, L, D, causal); continue
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, L, D, device=dev, dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        fl = 4 * B * H * L * L * D / (2 if causal else 1)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=bool(causal))
        sd = {}
        for bname, be in (("cudnn", torch.nn.attention.SDPBackend.CUDNN_ATTENTION), ("flash", torch.nn.attention.SDPBackend.FLASH_ATTENTION)):
            try:
                with torch.nn.attention.sdpa_kernel([be]):
                    sd[bname] = gtime(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)), calls, reps)
            except Exception as e:
                sd[bname] = float("nan"); print("sdpa", bname, repr(e)[:200])
        c = lambda t: cupy.from_dlpack(t.view(torch.int16) if t.dtype == torch.float16 else t)
        best = {}
        for g in cands:
            S = g["SPLIT_KV"]
            ws_o = torch.empty(S * B * H * L * D if S > 1 else 1, device=dev); ws_l = torch.empty(S * B * H * L if S > 1 else 1, device=dev)
            th = (g["WARPS"] + g["PRODUCER_WARPS"]) * 32
            args = (c(q), c(k), c(v), c(o), c(ws_o), c(ws_l), cupy.int32(B), cupy.int32(H), cupy.int32(L), cupy.int32(L), cupy.int32(causal), cupy.float32(1 / math.sqrt(D)))
            cargs = (c(ws_o), c(ws_l), c(o), cupy.int32(B), cupy.int32(H), cupy.int32(L), cupy.int32(S))
            res = {}
            for tag in ("base", "new"):
                try:
                    f, cb, sm = fn(tag, g)
                    def launch():
                        st = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
                        f(((L + g["BLOCK_M"] - 1) // g["BLOCK_M"], B * H, S), (th,), args, shared_mem=sm, stream=st)
                        if S > 1: cb(((L + 3) // 4, B * H), (128,), cargs, stream=st)
                    o.fill_(float("nan"))
                    us = gtime(launch, calls, reps)
                    err = ((o.float() - ref).norm() / ref.norm()).item()
                    res[tag] = dict(us=us, err=err, regs=f.num_regs)
                except Exception as e:
                    res[tag] = dict(us=float("nan"), err=float("nan"), error=repr(e)[:300])
            rec = dict(shape=[B, H, L, D, causal], g=g, name=name(g), sdpa=sd, tflops_new=fl / res["new"]["us"] / 1e6 if res["new"]["us"] == res["new"]["us"] else None, **res)
            fout.write(json.dumps(rec) + "\n"); fout.flush()
            for tag in ("base", "new"):
                u = res[tag]["us"]
                if u == u and res[tag]["err"] < 1e-2 and (tag not in best or u < best[tag][0]): best[tag] = (u, name(g))
        line = "B%d H%d L%d D%d c%d | cudnn %.1f flash %.1f us | best base %s | best new %s" % (B, H, L, D, causal, sd["cudnn"], sd["flash"],
               "%.1f us (%s)" % best["base"] if "base" in best else "-", "%.1f us (%s)" % best["new"] if "new" in best else "-")
        print(line, flush=True); summary.append(line)
        del q, k, v, o; torch.cuda.empty_cache()
    open(os.path.join(OUT, "bench_summary.txt"), "w").write("\n".join(summary) + "\n")
    print("bench done in %.0fs" % (time.time() - T0))
