#!/usr/bin/env python3
"""GPU GREEN check of kernels/attention.cu for a list of genomes.

driver:  gpu_harness.py genomes.json OUTDIR    (spawns workers, restarts after a fault/hang)
worker:  gpu_harness.py --worker genomes.json OUTDIR START
"""
import json, math, os, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nvrtc_compile import KEYS, smem_bytes
import glob
def _inc():
    # cupy's NVRTC include dir (pip nvidia/cu13) may lack crt/mma.h: add a dir that has it.
    for d in ["/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"]:
        if os.path.exists(os.path.join(d, "crt", "mma.h")):
            return ("-I" + d,)
    for d in glob.glob("/usr/local/cuda*/**/crt/mma.h", recursive=True):
        return ("-I" + os.path.dirname(os.path.dirname(d)),)
    return ()
INC = _inc()

SHAPES = [  # (B, H, Lq, Lk, causal, logit_scale)
    (1, 2, 77, 1000, 0, 1.0), (1, 2, 77, 1000, 1, 1.0),
    (1, 2, 1000, 77, 0, 1.0), (1, 2, 1000, 77, 1, 1.0),
    (1, 8, 512, 512, 0, 1.0), (1, 8, 512, 512, 1, 1.0),
    (3, 5, 130, 130, 0, 1.0), (3, 5, 130, 130, 1, 1.0),
    (1, 2, 200, 333, 1, 30.0), (2, 3, 1, 50, 0, 30.0),
    (1, 1, 3, 5, 1, 1.0), (2, 2, 65, 17, 0, 1.0),
]

def worker(gfile, outdir, start):
    import torch, cupy
    src = open(os.environ.get("EVO_TEMPLATE", "kernels/attention.cu")).read()
    genomes = json.load(open(gfile))
    res_f = open(os.path.join(outdir, "results.jsonl"), "a")
    dev = torch.device("cuda")
    for gi in range(start, len(genomes)):
        g = genomes[gi]
        print("START", gi, flush=True)
        rec = dict(idx=gi, g=g, cases=[], status="ok")
        try:
            smem = smem_bytes(g)
            opts = tuple("-DEVO_%s=%d" % (k, g[k]) for k in KEYS) + ("-DEVO_SMEM_BYTES=%d" % smem, "--std=c++17", "-DEVO_MAX_REGS=%d" % g.get("MAX_REGS", 0)) + INC
            mod = cupy.RawModule(code=src, options=opts, backend="nvrtc")
            fwd = mod.get_function("evo_attention_fwd")
            comb = mod.get_function("evo_attention_combine")
            geo_ptr = mod.get_global("evo_geometry")
            geo = cupy.ndarray((6,), cupy.int32, geo_ptr).get().tolist()
            threads = (g["WARPS"] + g["PRODUCER_WARPS"]) * 32
            exp = [g["BLOCK_M"], threads, smem, g["SPLIT_KV"]]
            if geo[:4] != exp:
                raise RuntimeError("geometry %s != %s" % (geo, exp))
            if smem > 48 * 1024:
                fwd.max_dynamic_shared_size_bytes = smem
            D = g["HEAD_DIM"]; dt = torch.bfloat16 if g["BF16"] else torch.float16
            for (B, H, Lq, Lk, causal, ls) in SHAPES:
                gen = torch.Generator(device=dev); gen.manual_seed(1000 * gi + Lq + 7 * Lk + causal)
                q = (torch.randn(B, H, Lq, D, device=dev, generator=gen) * ls).to(dt)
                k = (torch.randn(B, H, Lk, D, device=dev, generator=gen) * (ls if ls > 1 else 1)).to(dt)
                v = torch.randn(B, H, Lk, D, device=dev, generator=gen).to(dt)
                o = torch.full((B, H, Lq, D), float("nan"), device=dev, dtype=dt)
                S = g["SPLIT_KV"]
                ws_o = torch.full((S, B * H, Lq, D), float("nan"), device=dev) if S > 1 else torch.empty(1, device=dev)
                ws_l = torch.full((S, B * H, Lq), float("nan"), device=dev) if S > 1 else torch.empty(1, device=dev)
                c = lambda t: cupy.from_dlpack(t.view(torch.int16) if t.dtype in (torch.float16, torch.bfloat16) else t)
                scale = 1.0 / math.sqrt(D)
                torch.cuda.synchronize()
                grid = ((Lq + g["BLOCK_M"] - 1) // g["BLOCK_M"], B * H, S)
                fwd(grid, (threads,), (c(q), c(k), c(v), c(o), c(ws_o), c(ws_l), cupy.int32(B), cupy.int32(H),
                     cupy.int32(Lq), cupy.int32(Lk), cupy.int32(causal), cupy.float32(scale)), shared_mem=smem)
                if S > 1:
                    rows, cth = geo[4], geo[5]
                    comb(((Lq + rows - 1) // rows, B * H), (cth,), (c(ws_o), c(ws_l), c(o), cupy.int32(B),
                         cupy.int32(H), cupy.int32(Lq), cupy.int32(S)))
                cupy.cuda.Device().synchronize()
                s = (q.float() @ k.float().transpose(-1, -2)) * scale
                if causal:
                    msk = torch.ones(Lq, Lk, device=dev, dtype=torch.bool).tril()
                    s = s.masked_fill(~msk, float("-inf"))
                ref = torch.softmax(s, -1) @ v.float()
                of = o.float()
                nan = int(torch.isnan(of).sum().item() + torch.isinf(of).sum().item())
                err = ((of - ref).norm() / ref.norm()).item() if nan == 0 else float("nan")
                mx = (of - ref).abs().max().item() if nan == 0 else float("nan")
                ok = nan == 0 and err < 1e-2
                case = dict(shape=[B, H, Lq, Lk, causal, ls], err=err, maxabs=mx, nan=nan, ok=ok)
                if not ok and nan:
                    bad = torch.isnan(of).nonzero()[:3].tolist(); case["nan_at"] = bad
                if not ok and nan == 0:
                    rowerr = ((of - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-6))
                    case["worst_row"] = rowerr.flatten().argmax().item() % Lq
                rec["cases"].append(case)
                if not ok: rec["status"] = "FAIL"
        except Exception as e:
            rec["status"] = "ERROR"; rec["error"] = repr(e)[:2000]
        res_f.write(json.dumps(rec) + "\n"); res_f.flush()
        print("DONE", gi, rec["status"], flush=True)
        if rec["status"] == "ERROR" and ("illegal" in rec.get("error", "") or "CUDA_ERROR" in rec.get("error", "")):
            sys.exit(3)  # context likely dead; driver restarts at gi+1

def _precompile(args):
    g, src = args
    try:
        import cupy
        opts = tuple("-DEVO_%s=%d" % (k, g[k]) for k in KEYS) + ("-DEVO_SMEM_BYTES=%d" % smem_bytes(g), "--std=c++17", "-DEVO_MAX_REGS=%d" % g.get("MAX_REGS", 0)) + INC
        cupy.RawModule(code=src, options=opts, backend="nvrtc").get_function("evo_attention_fwd")
        return None
    except Exception as e:
        return repr(e)[:500]

def driver(gfile, outdir):
    os.makedirs(outdir, exist_ok=True)
    t = t0 = time.time()
    print("include extra:", INC, flush=True)
    from multiprocessing import Pool
    src = open(os.environ.get("EVO_TEMPLATE", "kernels/attention.cu")).read()
    with Pool(14) as pool:  # fills cupy's on-disk kernel cache in parallel
        errs = pool.map(_precompile, [(g, src) for g in json.load(open(gfile))])
    print("precompiled in %.0fs, %d compile errors" % (time.time() - t, sum(e is not None for e in errs)), flush=True)
    n = len(json.load(open(gfile))); start = 0
    while start < n:
        p = subprocess.Popen([sys.executable, __file__, "--worker", gfile, outdir, str(start)],
                             stdout=subprocess.PIPE, stderr=open(os.path.join(outdir, "worker_stderr.txt"), "a"), text=True)
        last = start - 1; cur = None; tlast = time.time()
        import selectors
        sel = selectors.DefaultSelector(); sel.register(p.stdout, selectors.EVENT_READ)
        while True:
            ev = sel.select(timeout=5)
            if ev:
                line = p.stdout.readline()
                if not line:
                    break
                parts = line.split()
                if parts[0] == "START": cur = int(parts[1]); tlast = time.time()
                if parts[0] == "DONE": last = int(parts[1])
            if time.time() - tlast > 90 and cur is not None and cur > last:
                p.kill(); print("HANG genome", cur, flush=True)
                with open(os.path.join(outdir, "results.jsonl"), "a") as f:
                    f.write(json.dumps(dict(idx=cur, g=json.load(open(gfile))[cur], status="HANG", cases=[])) + "\n")
                last = cur; break
            if p.poll() is not None and not ev:
                break
            if time.time() - t0 > float(os.environ.get("HARNESS_BUDGET", "380")):
                p.kill(); p.wait(); print("BUDGET exhausted at genome", cur, flush=True)
                summarize(outdir); return
        p.wait()
        if cur is not None and cur > last:  # crashed mid-genome
            with open(os.path.join(outdir, "results.jsonl"), "a") as f:
                f.write(json.dumps(dict(idx=cur, g=json.load(open(gfile))[cur], status="CRASH", cases=[])) + "\n")
            last = cur
        start = last + 1
        if time.time() - t0 > float(os.environ.get("HARNESS_BUDGET", "380")):
            print("BUDGET exhausted at", start); break
    summarize(outdir)

def short(g):
    m = {0: "s", 1: "w", 2: "m"}
    return "D%d %s %s%s P%s O%s bm%d bn%d w%d p%d %s st%d %s v%d %s sp%d mb%d" % (
        g["HEAD_DIM"], "bf" if g["BF16"] else "f16", m[g["QK_MATH"]], m[g["PV_MATH"]], "r" if g["P_REGS"] else "s",
        "r" if g["O_REGS"] else "s", g["BLOCK_M"], g["BLOCK_N"], g["WARPS"], g["PRODUCER_WARPS"],
        "cpa" if g["CP_ASYNC"] else "dir", g["STAGES"], ["pl", "pad", "swz"][g["SMEM_LAYOUT"]], g["VEC_BYTES"],
        "e2" if g["EXP2"] else "e", g["SPLIT_KV"], g["MIN_BLOCKS"]) + (" cap%d" % g["MAX_REGS"] if g.get("MAX_REGS") else "")

def summarize(outdir):
    recs = {}
    for line in open(os.path.join(outdir, "results.jsonl")):
        r = json.loads(line); recs[r["idx"]] = r
    nok = 0
    for i in sorted(recs):
        r = recs[i]
        if r["status"] == "ok":
            nok += 1; continue
        bad = [c for c in r["cases"] if not c["ok"]]
        print("%-4s %3d %s | %s" % (r["status"], i, short(r["g"]),
              r.get("error", "") [:300] or "; ".join("%s err=%.3g nan=%d%s" % (c["shape"], c["err"], c["nan"],
              (" at " + str(c.get("nan_at", c.get("worst_row")))) ) for c in bad[:4])))
    worst = max((c["err"] for r in recs.values() for c in r["cases"] if c["ok"]), default=0)
    print("SUMMARY: %d genomes run, %d all-green, %d not; worst passing rel err %.2e" % (len(recs), nok, len(recs) - nok, worst))

if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "--summary":
        summarize(sys.argv[2])
    else:
        driver(sys.argv[1], sys.argv[2])
