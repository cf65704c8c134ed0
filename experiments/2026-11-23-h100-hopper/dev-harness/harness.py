# Dev harness: loads attention_sm90 cubins, checks against torch SDPA (fp32 math), times vs SDPA.
import ctypes, json, math, os, sys, glob
import torch
import torch.nn.functional as F
from cuda.bindings import driver as cu

def ck(r):
    err = r[0] if isinstance(r, tuple) else r
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(str(err))
    return r[1:] if isinstance(r, tuple) and len(r) > 1 else None

torch.cuda.init(); torch.zeros(1, device="cuda")
dev = torch.cuda.current_device()

class Kern:
    def __init__(self, path, meta):
        self.meta = meta
        data = open(path, "rb").read()
        (self.mod,) = ck(cu.cuModuleLoadData(data))
        (self.fwd,) = ck(cu.cuModuleGetFunction(self.mod, b"evo_attention_fwd"))
        (self.comb,) = ck(cu.cuModuleGetFunction(self.mod, b"evo_attention_combine"))
        self.geom = self.read_sym(b"evo_geometry", 6)
        try: self.tma = self.read_sym(b"evo_tensor_maps", 4)
        except RuntimeError: self.tma = None
        if self.geom[2] > 48 * 1024:
            ck(cu.cuFuncSetAttribute(self.fwd, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.geom[2]))
    def read_sym(self, name, n):
        ptr, size = ck(cu.cuModuleGetGlobal(self.mod, name))
        buf = (ctypes.c_int * n)()
        ck(cu.cuMemcpyDtoH(ctypes.addressof(buf), ptr, 4 * n))
        return list(buf)

def tmap(t, rows):
    B, H, L, D = t.shape
    dt = cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16 if t.dtype == torch.float16 else cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    u32 = cu.cuuint32_t; u64 = cu.cuuint64_t
    (m,) = ck(cu.cuTensorMapEncodeTiled(dt, u32(3), t.data_ptr(), [u64(D), u64(L), u64(B * H)], [u64(D * 2), u64(L * D * 2)], [u32(64), u32(rows), u32(1)], [u32(1), u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B, cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
    return m

def launch(k, q, kk, v, o, ws_o, ws_l, causal, stream=0):
    B, H, Lq, D = q.shape; Lk = kk.shape[2]
    g = k.geom
    keep = []
    def arg(c):
        keep.append(c); return ctypes.addressof(c)
    ptrs = []
    if k.tma:
        for t, rows in ((q, k.tma[0]), (kk, k.tma[1]), (v, k.tma[1])):
            m = tmap(t, rows)
            raw = (ctypes.c_uint64 * 16).from_address(int(m.getPtr()))
            c = (ctypes.c_uint64 * 16)(*raw)
            ptrs.append(arg(c))
    for t in (q, kk, v, o):
        ptrs.append(arg(ctypes.c_uint64(t.data_ptr())))
    ptrs.append(arg(ctypes.c_uint64(ws_o.data_ptr() if ws_o is not None else 0)))
    ptrs.append(arg(ctypes.c_uint64(ws_l.data_ptr() if ws_l is not None else 0)))
    for x in (B, H, Lq, Lk, int(causal)):
        ptrs.append(arg(ctypes.c_int(x)))
    ptrs.append(arg(ctypes.c_float(1.0 / math.sqrt(D))))
    arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
    ck(cu.cuLaunchKernel(k.fwd, (Lq + g[0] - 1) // g[0], B * H, g[3], g[1], 1, 1, g[2], stream, ctypes.addressof(arr), 0))
    if g[3] > 1:
        p2 = []
        for x in (ws_o.data_ptr(), ws_l.data_ptr(), o.data_ptr()):
            p2.append(arg(ctypes.c_uint64(x)))
        for x in (B, H, Lq, g[3]):
            p2.append(arg(ctypes.c_int(x)))
        arr2 = (ctypes.c_void_p * len(p2))(*p2)
        ck(cu.cuLaunchKernel(k.comb, (Lq + 3) // 4, B * H, 1, 128, 1, 1, 0, stream, ctypes.addressof(arr2), 0))
    return keep

def run(k, B, H, Lq, Lk, D, dtype, causal, gain=1.0):
    q = (torch.randn(B, H, Lq, D, device="cuda") * gain).to(dtype)
    kk = torch.randn(B, H, Lk, D, device="cuda").to(dtype)
    v = torch.randn(B, H, Lk, D, device="cuda").to(dtype)
    o = torch.full((B, H, Lq, D), float("nan"), device="cuda", dtype=dtype)
    s = k.geom[3]
    ws_o = torch.full((s * B * H * Lq * D,), float("nan"), device="cuda") if s > 1 else None
    ws_l = torch.full((s * B * H * Lq,), float("nan"), device="cuda") if s > 1 else None
    launch(k, q, kk, v, o, ws_o, ws_l, causal)
    torch.cuda.synchronize()
    mask = None
    if causal:
        mask = torch.ones(Lq, Lk, dtype=torch.bool, device="cuda").tril()
    ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float(), attn_mask=mask)
    err = ((o.float() - ref).norm() / ref.norm()).item()
    nan = torch.isnan(o).sum().item()
    return err, nan, (q, kk, v, o, ws_o, ws_l)

def bench(k, B, H, L, D, dtype, causal, iters=30):
    err, nan, (q, kk, v, o, ws_o, ws_l) = run(k, B, H, L, L, D, dtype, causal)
    for _ in range(3): launch(k, q, kk, v, o, ws_o, ws_l, causal)
    st = torch.cuda.Event(enable_timing=True); en = torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        st.record(); launch(k, q, kk, v, o, ws_o, ws_l, causal); en.record(); torch.cuda.synchronize(); ts.append(st.elapsed_time(en) * 1e3)
    ts.sort()
    return ts[len(ts) // 2], err

def sdpa_us(B, H, L, D, dtype, causal, backend):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    q = torch.randn(B, H, L, D, device="cuda", dtype=dtype); kk = torch.randn_like(q); v = torch.randn_like(q)
    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]
    with sdpa_kernel(be):
        for _ in range(3): F.scaled_dot_product_attention(q, kk, v, is_causal=bool(causal))
        st = torch.cuda.Event(enable_timing=True); en = torch.cuda.Event(enable_timing=True); ts = []
        for _ in range(30):
            st.record(); F.scaled_dot_product_attention(q, kk, v, is_causal=bool(causal)); en.record(); torch.cuda.synchronize(); ts.append(st.elapsed_time(en) * 1e3)
    ts.sort(); return ts[len(ts) // 2]

if __name__ == "__main__":
    out = os.environ.get("OUT", "/tmp")
    lines = []
    def say(s):
        print(s, flush=True); lines.append(s)
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "cubins", "*.cubin"))):
        name = os.path.basename(path)[:-6]
        meta = dict(kv.split("=") for kv in name.split("_"))
        D = int(meta["D"]); dtype = torch.bfloat16 if meta["bf"] == "1" else torch.float16
        try:
            k = Kern(path, meta)
        except Exception as e:
            say(f"{name}: LOAD FAIL {e}"); continue
        res = []
        for (B, H, Lq, Lk, c, gain) in [(1, 2, 128, 128, 0, 1), (2, 3, 77, 77, 1, 1), (1, 5, 77, 1000, 0, 1), (1, 3, 1000, 77, 1, 1), (1, 2, 300, 300, 1, 30), (3, 1, 1, 1000, 0, 1), (1, 4, 512, 512, 0, 40)]:
            try:
                err, nan, _ = run(k, B, H, Lq, Lk, D, dtype, c, gain)
                res.append(f"{Lq}x{Lk}{'c' if c else ''}:{err:.1e}{'/NaN'+str(nan) if nan else ''}")
            except Exception as e:
                res.append(f"{Lq}x{Lk}: EXC {e}"); break
        say(f"{name}: " + " ".join(res))
        if meta.get("bench") == "1":
            for (B, H, L, c) in ([(2, 16, 4096, 0), (2, 16, 4096, 1), (1, 16, 8192, 0)] if D == 128 else [(4, 16, 1024, 0), (4, 16, 1024, 1), (1, 8, 512, 0)]):
                us, err = bench(k, B, H, L, D, dtype, c)
                fl = 4 * B * H * L * L * D / (2 if c else 1)
                cd = sdpa_us(B, H, L, D, dtype, c, "cudnn"); fa = sdpa_us(B, H, L, D, dtype, c, "flash")
                say(f"   B{B} H{H} L{L} D{D} c{c}: {us:.1f} us {fl/us/1e6:.0f} TF err {err:.1e} | cudnn {cd:.1f} ({fl/cd/1e6:.0f} TF) flash {fa:.1f} | ratio {cd/us:.2f}x")
    open(os.path.join(out, "harness.txt"), "w").write("\n".join(lines) + "\n")
