"""Checks and times the Ampere backward template (kernels/attention_bwd.cu) on a GPU.

The template is concatenated the way the host does (kernels/mask.cuh, kernels/mma.cuh,
kernels/attention_bwd.cu, kernels/attention_bwd_kernel.cuh, each behind a #line),
compiled with cupy's NVRTC, and its four kernels launched per the backward ABI
(kernels/ABI.md). dQ, dK, dV are compared with torch float64 autograd of the masked
attention; O and lse come from float64 too (O cast to T, lse fp32, +inf for a row that
sees no key). Every output is pre-filled with NaN and followed by a guard region; the
workspace is followed by a guard too, and the inputs are checked unchanged.

With `--template sm90` it checks and times the Hopper backward template instead
(kernels/attention_bwd_sm90.cu + attention_bwd_sm90_wgmma.cuh + attention_bwd_sm90_kernel.cuh,
compiled for sm_90a; genomes SM90_GENOMES), timing the Ampere fa2-bwd beside it.

usage: python3 check.py [--template ampere|sm90] [--quick] [--no-time | --time-only]
                       [--sanitize atomic|separate]
(--sanitize: two small cases of one dQ design, for compute-sanitizer)
"""

import math
import os
import statistics
import sys

import cupy as cp
import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FILES = ["mma.cuh", "attention_bwd.cu", "attention_bwd_kernel.cuh"]
SM90_FILES = ["attention_bwd_sm90.cu", "attention_bwd_sm90_wgmma.cuh", "attention_bwd_sm90_kernel.cuh"]
TEMPLATE = sys.argv[sys.argv.index("--template") + 1] if "--template" in sys.argv else "ampere"
GUARD = 4096

# Genomes of the ampere_bwd family as macro values (genomes/fa2-bwd.toml first).
FA2 = dict(BN=128, BM=64, W=8, ST=2, CP=1, LAYOUT=2, VEC=16, EXP=1, SEP=0, MINB=1, MAXR=0)
GENOMES = {
    "fa2-bwd": FA2,
    "bn64-w4": dict(FA2, BN=64, W=4),
    "bm16": dict(FA2, BM=16),
    "bm128-w4": dict(FA2, BM=128, BN=64, W=4),
    "stages1": dict(FA2, ST=1),
    "stages3": dict(FA2, ST=3, BN=64, W=4),
    "direct": dict(FA2, CP=0, VEC=8),
    "padded": dict(FA2, LAYOUT=1),
    "plain-vec4": dict(FA2, LAYOUT=0, VEC=4),
    "exp0": dict(FA2, EXP=0),
    "exp2": dict(FA2, EXP=2),
    "separate": dict(FA2, SEP=1, BN=64, BM=64, W=4),
    "separate-w2": dict(FA2, SEP=1, BN=32, BM=32, W=2, ST=3, LAYOUT=1, EXP=2),
    "separate-direct": dict(FA2, SEP=1, BN=64, BM=64, W=4, ST=1, CP=0, LAYOUT=0, VEC=16),
    "maxregs": dict(FA2, BN=64, W=4, MAXR=168),
    "bm32": dict(FA2, BM=32),
    "bn128-w4-bm32": dict(FA2, BM=32, W=4),
    "tiny-w1": dict(FA2, BN=16, BM=16, W=1, ST=4),
    "w2-direct-padded": dict(FA2, BN=32, BM=128, W=2, ST=3, CP=0, LAYOUT=1, VEC=4, EXP=2),
    "bn256-bm32": dict(FA2, BN=256, BM=32),
    "minblocks4": dict(FA2, BN=64, W=4, MINB=4),
    # D256: fa2-bwd's K, V and two Q/dO stages need 275 KiB there.
    "d256": dict(FA2, BN=64, BM=32, W=4),
}


# Genomes of the Hopper backward template (kernels/ABI.md, "The Hopper backward template").
# BM None: 128 at D64 (FlashAttention-3's 128 x 128), 64 otherwise (64 x 128).
SM90 = dict(T="sm90", BN=128, BM=None, WGS=2, ST=3, EXP=1, SEP=0, BULK=0, PR=40)
SM90_GENOMES = {
    "h-fa3": SM90,
    "h-bulk": dict(SM90, ST=2, BULK=1),
    "h-st1": dict(SM90, ST=1),
    "h-st2": dict(SM90, ST=2),
    "h-exp0": dict(SM90, EXP=0),
    "h-wg1": dict(SM90, WGS=1, BN=64, PR=0),
    "h-bm64": dict(SM90, BM=64),
    "h-wg3": dict(SM90, WGS=3, BN=192, BM=64, PR=24),
    "h-pr0": dict(SM90, BM=64, PR=0),
    "h-sep": dict(SM90, SEP=1),
    "h-sep-st2": dict(SM90, SEP=1, ST=2),
}
# Timing only (EVO_BENCH_SKIP: wrong results): what the dQ adds, the whole dQ step and
# the producer's reloads cost.
SM90_BENCH = {
    "x-noadd": dict(SM90, SKIP=1),
    "x-nodq": dict(SM90, SKIP=2),
    "x-noload": dict(SM90, SKIP=4),
    "x-norot": dict(SM90, SKIP=8),
}
# The head dims where each Hopper genome is valid (the template's static_asserts).
SM90_DIMS = {"h-wg3": (64,), "h-pr0": (64,), "h-bm64": (64,)}
if TEMPLATE == "sm90":
    GENOMES = dict(GENOMES, **SM90_GENOMES, **SM90_BENCH)


def resolve(D, g):
    if g.get("T") == "sm90" and g["BM"] is None:
        g = dict(g, BM=128 if D == 64 else 64)
    return g


def source(template="ampere"):
    parts = [open(os.path.join(ROOT, "kernels", "mask.cuh")).read()]
    for f in (SM90_FILES if template == "sm90" else FILES):
        parts.append('#line 1 "kernels/%s"\n' % f)
        parts.append(open(os.path.join(ROOT, "kernels", f)).read())
    return "".join(parts)


def smem_plan_sm90(D, g):
    """kernels/ABI.md, "The Hopper backward template": main and dq kernel bytes."""
    Ds = (D + 63) // 64 * 64
    BN, BM, ST, W = g["BN"], g["BM"], g["ST"], g["WGS"]
    stage = W * 4 * 16 * 68 * 4 if g["BULK"] and not g["SEP"] else 0
    main = 1024 + 2 * BN * Ds * 2 + 2 * ST * BM * Ds * 2 + (0 if g["SEP"] else 2 * BM * BN * 2) \
        + stage + ST * 2 * BM * 4 + 256
    dq = (1024 + 2 * 64 * W * Ds * 2 + ST * 2 * 64 * Ds * 2 + 2 * 64 * W * 4 + 256) if g["SEP"] else 0
    return main, dq


def smem_plan(D, g):
    pitch = D + (8 if g["LAYOUT"] == 1 else 0)
    main = (2 * g["BN"] * pitch * 2 + g["ST"] * 2 * g["BM"] * pitch * 2 + g["ST"] * 2 * g["BM"] * 4
            + g["BN"] * (g["BM"] + 8) * 2)
    dq = (2 * g["BM"] * pitch * 2 + g["ST"] * 2 * g["BN"] * pitch * 2 + 2 * g["BM"] * 4) if g["SEP"] else 0
    return main, dq


def defines(D, bf16, g):
    if g.get("T") == "sm90":
        main, dq = smem_plan_sm90(D, g)
        return dict(EVO_HEAD_DIM=D, EVO_BF16=int(bf16), EVO_BLOCK_N=g["BN"], EVO_BLOCK_M=g["BM"],
                    EVO_CONSUMER_WGS=g["WGS"], EVO_STAGES=g["ST"], EVO_EXP2=g["EXP"],
                    EVO_DQ_SEPARATE=g["SEP"], EVO_DQ_BULK=g["BULK"], EVO_PRODUCER_REGS=g["PR"],
                    EVO_SMEM_BYTES=main, EVO_DQ_SMEM_BYTES=dq, EVO_BENCH_SKIP=g.get("SKIP", 0))
    main, dq = smem_plan(D, g)
    return dict(EVO_HEAD_DIM=D, EVO_BF16=int(bf16), EVO_BLOCK_N=g["BN"], EVO_BLOCK_M=g["BM"],
                EVO_WARPS=g["W"], EVO_STAGES=g["ST"], EVO_CP_ASYNC=g["CP"],
                EVO_SMEM_LAYOUT=g["LAYOUT"], EVO_VEC_BYTES=g["VEC"], EVO_EXP2=g["EXP"],
                EVO_DQ_SEPARATE=g["SEP"], EVO_MIN_BLOCKS=g["MINB"], EVO_MAX_REGS=g["MAXR"],
                EVO_SMEM_BYTES=main, EVO_DQ_SMEM_BYTES=dq)


_modules = {}


class Module:
    def __init__(self, D, bf16, g):
        g = resolve(D, g)
        defs = defines(D, bf16, g)
        t = g.get("T", "ampere")
        arch = "sm_90a" if t == "sm90" else "sm_90"
        opts = ("-std=c++17", "--gpu-architecture=" + arch, "-I/usr/local/cuda/include") + tuple(
            "-D%s=%d" % kv for kv in defs.items())
        self.mod = cp.RawModule(code=source(t), options=opts)
        ptr = self.mod.get_global("evo_bwd_geometry")
        self.geo = [int(x) for x in cp.ndarray((10,), cp.int32, ptr).get()]
        ptr = self.mod.get_global("evo_deterministic")
        self.det = int(cp.ndarray((1,), cp.int32, ptr).get()[0])
        self.pre = self.mod.get_function("evo_attention_bwd_pre")
        self.main = self.mod.get_function("evo_attention_bwd")
        self.dq = self.mod.get_function("evo_attention_bwd_dq")
        self.post = self.mod.get_function("evo_attention_bwd_post")
        g_ = self.geo
        if g_[2] > 48 * 1024:
            self.main.max_dynamic_shared_size_bytes = g_[2]
        if g_[4] > 0 and g_[5] > 48 * 1024:
            self.dq.max_dynamic_shared_size_bytes = g_[5]

    def launch(self, bufs, B, H, Hkv, Lq, Lk, causal, scale, diag, wl, wr):
        g = self.geo
        i32 = np.int32
        args = tuple(bufs) + (i32(B), i32(H), i32(Lq), i32(Lk), i32(causal), np.float32(scale),
                              i32(Hkv), i32(diag), i32(wl), i32(wr))
        self.pre(((Lq + g[6] - 1) // g[6], B * H), (g[7],), args)
        self.main(((Lk + g[0] - 1) // g[0], B * Hkv), (g[1],), args, shared_mem=g[2])
        if g[4] > 0:
            self.dq(((Lq + g[3] - 1) // g[3], B * H), (g[4],), args, shared_mem=g[5])
        if g[9] > 0:
            self.post(((Lq + g[8] - 1) // g[8], B * H), (g[9],), args)


def module(D, bf16, name):
    key = (D, bf16, name)
    if key not in _modules:
        _modules[key] = Module(D, bf16, GENOMES[name])
    return _modules[key]


def as_cupy(t):
    """A cupy view of a torch tensor's memory (bf16 through int16)."""
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    return cp.asarray(t)


def visible(Lq, Lk, causal, diag, wl, wr, device):
    i = torch.arange(Lq, device=device)[:, None]
    j = torch.arange(Lk, device=device)[None, :]
    m = torch.ones(Lq, Lk, dtype=torch.bool, device=device)
    if causal:
        m &= j <= i + diag
    if wl >= 0:
        m &= j >= i + diag - wl
    if wr >= 0:
        m &= j <= i + diag + wr
    return m


def reference(q, k, v, do, mask, scale, G):
    """float64 O, lse (+inf for empty rows) and dQ, dK, dV by autograd."""
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    ke = k64.repeat_interleave(G, dim=1)
    ve = v64.repeat_interleave(G, dim=1)
    s = (q64 @ ke.transpose(-1, -2)) * scale
    rows = mask.any(-1)  # [Lq]
    s = s.masked_fill(~mask, float("-inf")).masked_fill(~rows[:, None], 0.0)
    p = torch.softmax(s, -1) * rows[:, None]
    o = p @ ve
    lse = torch.logsumexp(s, -1).masked_fill(~rows, float("inf"))
    dq, dk, dv = torch.autograd.grad(o, (q64, k64, v64), do.double())
    return o.detach(), lse.detach(), dq, dk, dv


def guarded(shape, dtype, fill):
    n = math.prod(shape)
    buf = torch.full((n + GUARD,), fill, dtype=dtype, device="cuda")
    return buf, buf[:n].view(shape)


def check_case(name, D, bf16, B, H, Hkv, Lq, Lk, causal=0, diag=0, wl=-1, wr=-1, seed=0):
    dt = torch.bfloat16 if bf16 else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, H, Lq, D, device="cuda", generator=gen).to(dt)
    k = torch.randn(B, Hkv, Lk, D, device="cuda", generator=gen).to(dt)
    v = torch.randn(B, Hkv, Lk, D, device="cuda", generator=gen).to(dt)
    do = torch.randn(B, H, Lq, D, device="cuda", generator=gen).to(dt)
    scale = 1.0 / math.sqrt(D)
    mask = visible(Lq, Lk, causal, diag, wl, wr, "cuda")
    o64, lse64, rdq, rdk, rdv = reference(q, k, v, do, mask, scale, H // Hkv)
    o = o64.to(dt)
    lse = lse64.float().contiguous()
    ins = [x.contiguous() for x in (q, k, v, o, do, lse)]
    before = [x.clone() for x in ins]
    dq_buf, dq = guarded((B, H, Lq, D), dt, float("nan"))
    dk_buf, dk = guarded((B, Hkv, Lk, D), dt, float("nan"))
    dv_buf, dv = guarded((B, Hkv, Lk, D), dt, float("nan"))
    ws_n = B * H * Lq * (D + 1)
    ws_buf = torch.full((ws_n + GUARD,), 12345.0, dtype=torch.float32, device="cuda")
    m = module(D, bf16, name)
    bufs = [as_cupy(x) for x in ins] + [as_cupy(dq), as_cupy(dk), as_cupy(dv), as_cupy(ws_buf)]
    m.launch(bufs, B, H, Hkv, Lq, Lk, causal, scale, diag, wl, wr)
    torch.cuda.synchronize()
    problems = []
    if m.det:  # evo_deterministic = 1: a second launch gives the same bits
        first = [x.clone() for x in (dq, dk, dv)]
        m.launch(bufs, B, H, Hkv, Lq, Lk, causal, scale, diag, wl, wr)
        torch.cuda.synchronize()
        if not all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(first, (dq, dk, dv))):
            problems.append("not bitwise repeatable although evo_deterministic = 1")
    for label, buf, n in (("dQ", dq_buf, dq.numel()), ("dK", dk_buf, dk.numel()), ("dV", dv_buf, dv.numel())):
        if not torch.isnan(buf[n:]).all():
            problems.append("%s guard written" % label)
        if torch.isnan(buf[:n]).any() or torch.isinf(buf[:n]).any():
            problems.append("%s has NaN/Inf (unwritten?)" % label)
    if not (ws_buf[ws_n:] == 12345.0).all():
        problems.append("ws guard written")
    for x, y in zip(ins, before):
        if not torch.equal(x, y):
            problems.append("an input changed")
    tol = 2e-2 if bf16 else 1e-2
    errs = []
    for label, got, ref in (("dQ", dq, rdq), ("dK", dk, rdk), ("dV", dv, rdv)):
        got = got.double()
        diff = (got - ref).nan_to_num(1e30)
        rel = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
        errs.append("%s max %.2e rel %.2e" % (label, diff.abs().max().item(), rel))
        # A reference that is zero up to rounding (one visible key a row: dS = 0 exactly)
        # has no relative error; there the absolute error must be at rounding level.
        tiny = ref.norm().item() < 1e-6 * math.sqrt(ref.numel())
        if not (rel < tol or (tiny and diff.abs().max().item() < 1e-4)):
            problems.append("%s rel_frob %.3e >= %.0e" % (label, rel, tol))
    ok = not problems
    desc = "%-16s D%-3d %s B%d H%d Hkv%d Lq%d Lk%d causal%d diag%d wl%d wr%d" % (
        name, D, "bf16" if bf16 else "f16 ", B, H, Hkv, Lq, Lk, causal, diag, wl, wr)
    print("%s %s | %s%s" % ("PASS" if ok else "FAIL", desc, "; ".join(errs),
                            "" if ok else " | " + "; ".join(problems)), flush=True)
    return ok


def problems_full():
    # (B, H, Hkv, Lq, Lk, causal, diag, wl, wr)
    return [
        (1, 2, 2, 77, 131, 0, 0, -1, -1),
        (1, 2, 2, 131, 77, 1, 0, -1, -1),
        (1, 2, 2, 131, 77, 1, 77 - 131, -1, -1),
        (1, 2, 2, 77, 131, 1, 131 - 77, -1, -1),
        (2, 2, 2, 256, 256, 1, 0, -1, -1),
        (1, 2, 2, 1, 300, 0, 0, -1, -1),
        (1, 2, 2, 1, 300, 1, 299, -1, -1),
        (1, 2, 2, 200, 190, 0, 0, 37, 5),
        (1, 2, 2, 200, 190, 1, -10, 37, -1),
        (1, 8, 2, 150, 170, 1, 20, -1, -1),
        (2, 8, 1, 100, 100, 0, 0, -1, -1),
        (2, 4, 2, 33, 1, 0, 0, -1, -1),
        (1, 2, 1, 300, 17, 1, 0, -1, -1),
        (1, 4, 4, 64, 200, 0, 0, 0, 0),
        (1, 3, 1, 90, 90, 0, 0, -1, 10),
        (1, 2, 2, 100, 60, 1, -80, 5, -1),
    ]


def problems_short():
    return [
        (1, 2, 2, 77, 131, 0, 0, -1, -1),
        (1, 2, 2, 131, 77, 1, 77 - 131, -1, -1),
        (1, 2, 2, 200, 190, 0, 0, 37, 5),
        (1, 8, 2, 150, 170, 1, 20, -1, -1),
        (1, 2, 2, 1, 300, 0, 0, -1, -1),
    ]


def plan_sm90(quick):
    plan = []
    for D in (64, 96, 128):
        for bf16 in (0, 1):
            for p in (problems_short() if quick else problems_full()):
                plan.append(("h-fa3", D, bf16, p))
    for name in SM90_GENOMES:
        if name == "h-fa3":
            continue
        if name in ("h-bulk", "h-sep") and not quick:
            for p in problems_full():
                plan.append((name, 96, 0, p))
        dims = SM90_DIMS.get(name, (64, 128))
        for D, bf16 in ((64, 0), (128, 1), (96, 1)):
            if D in dims and (D != 96 or name in ("h-sep", "h-bulk")):
                for p in problems_short():
                    plan.append((name, D, bf16, p))
    return plan


def correctness(quick):
    total = passed = 0
    if TEMPLATE == "sm90":
        plan = plan_sm90(quick)
        for name, D, bf16, p in plan:
            total += 1
            try:
                passed += check_case(name, D, bf16, *p)
            except Exception as e:  # a compile or launch failure is a failed case
                print("FAIL %s D%d bf16=%d %s | %s: %s" % (name, D, bf16, p, type(e).__name__, str(e)[:3000]), flush=True)
        print("correctness: %d / %d passed" % (passed, total), flush=True)
        return
    plan = []
    for D in (64, 96, 128, 256):
        for bf16 in (0, 1):
            for p in (problems_short() if quick or D == 256 else problems_full()):
                plan.append(("d256" if D == 256 else "fa2-bwd", D, bf16, p))
    for name in GENOMES:
        if name in ("fa2-bwd", "d256"):
            continue
        for D, bf16 in ((64, 0), (128, 1)) if not quick else ((64, 0),):
            for p in problems_short():
                plan.append((name, D, bf16, p))
    for name in ("separate", "separate-w2"):
        for D, bf16 in ((96, 1), (256, 0)):
            for p in problems_short()[:2]:
                plan.append((name, D, bf16, p))
    for name, D, bf16, p in plan:
        total += 1
        try:
            passed += check_case(name, D, bf16, *p)
        except Exception as e:  # a compile or launch failure is a failed case
            print("FAIL %s D%d bf16=%d %s | %s: %s" % (name, D, bf16, p, type(e).__name__, str(e)[:3000]), flush=True)
    print("correctness: %d / %d passed" % (passed, total), flush=True)


TIMED = ("fa2-bwd", "bn64-w4", "bm32", "bn128-w4-bm32", "bm128-w4", "separate")
SM90_TIMED = ("fa2-bwd", "h-fa3", "h-st2", "h-bulk", "h-bm64", "h-wg3", "h-sep", "x-norot",
              "x-noadd", "x-nodq", "x-noload")


def time_events(fn, reps=20, samples=5):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / reps)
    return statistics.median(out)


def timing():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    print("timing: ms per backward (median of 5 x 20 back-to-back), TFLOP/s = 10*B*H*L*L*D (x0.5 causal)")
    for (B, H, L, D) in ((4, 16, 1024, 64), (2, 16, 4096, 128)):
        for causal in (0, 1):
            dt = torch.float16
            q = torch.randn(B, H, L, D, device="cuda", dtype=dt)
            k = torch.randn(B, H, L, D, device="cuda", dtype=dt)
            v = torch.randn(B, H, L, D, device="cuda", dtype=dt)
            do = torch.randn(B, H, L, D, device="cuda", dtype=dt)
            scale = 1.0 / math.sqrt(D)
            flops = 10.0 * B * H * L * L * D * (0.5 if causal else 1.0)
            row = "B%d H%d L%d D%d causal%d" % (B, H, L, D, causal)
            res = {}
            # torch's backends, forward precomputed.
            for bname, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                try:
                    qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
                    with sdpa_kernel(backend):
                        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=bool(causal))
                        fn = lambda: torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)
                        res[bname] = time_events(fn)
                except Exception as e:
                    print("  %s %s unavailable: %s" % (row, bname, str(e)[:200]))
            # ours: lse from the flash forward (natural log, [B,H,L]).
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, bool(causal), False, scale=scale)[:2]
            lse = lse.float().contiguous()
            dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
            ws = torch.empty(B * H * L * (D + 1), dtype=torch.float32, device="cuda")
            bufs = [as_cupy(x) for x in (q, k, v, o, do, lse, dq, dk, dv, ws)]
            for name in (SM90_TIMED if TEMPLATE == "sm90" else TIMED):
                if TEMPLATE == "sm90" and D not in SM90_DIMS.get(name, (64, 96, 128)):
                    continue
                try:
                    m = module(D, 0, name)
                except Exception as e:
                    print("  %s %s failed to build: %s" % (row, name, str(e)[:300]))
                    continue
                fn = lambda: m.launch(bufs, B, H, H, L, L, causal, scale, 0, -1, -1)
                res[name] = time_events(fn)
            m = module(D, 0, "h-fa3" if TEMPLATE == "sm90" else "fa2-bwd")
            fn = lambda: m.launch(bufs, B, H, H, L, L, causal, scale, 0, -1, -1)
            # agreement with flash's gradients as a sanity check of the timed run
            qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=bool(causal))
                rq, rk, rv = torch.autograd.grad(out, (qq, kk, vv), do)
            fn()
            torch.cuda.synchronize()
            agree = " ".join("%s %.1e" % (n, ((a.float() - b.float()).norm() / b.float().norm()).item())
                             for n, a, b in (("dQ", dq, rq), ("dK", dk, rk), ("dV", dv, rv)))
            print("  %-28s rel vs flash (%s): %s" % (row, "h-fa3" if TEMPLATE == "sm90" else "fa2-bwd", agree))
            for n, t in res.items():
                print("    %-14s %.3f ms %4.0f TF/s" % (n, t, flops / t / 1e9), flush=True)


def sanitize(which):
    name = "fa2-bwd" if which == "atomic" else "separate"
    if TEMPLATE == "sm90":
        name = "h-fa3" if which == "atomic" else "h-sep"
    ok = check_case(name, 64, 0, 1, 4, 2, 77, 131, 1, 131 - 77, -1, -1)
    ok &= check_case(name, 64, 1, 1, 2, 2, 200, 190, 0, 0, 37, 5)
    print("sanitize case(s) %s" % ("passed" if ok else "FAILED"))


if __name__ == "__main__":
    args = sys.argv[1:]
    print("device:", torch.cuda.get_device_name(), "| torch", torch.__version__, "| cupy", cp.__version__,
          "| CUDA", torch.version.cuda, flush=True)
    if "--sanitize" in args:
        sanitize(args[args.index("--sanitize") + 1])
        sys.exit(0)
    if "--time-only" not in args:
        correctness("--quick" in args)
    if "--no-time" not in args:
        timing()
