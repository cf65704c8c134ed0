#!/usr/bin/env python3
"""Compile kernels/attention.cu with NVRTC (ctypes) for given macros; report regs/spills."""
import ctypes, os, re, sys, itertools, random, json
# The pinned pip NVRTC (`just nvrtc` installs it into .nvrtc/ at the repo root).
LIB = os.environ.get("NVRTC_LIB", ".nvrtc/nvidia/cu13/lib/libnvrtc.so.13")
INC = os.environ.get("NVRTC_INCLUDE", ".nvrtc/nvidia/cu13/include")
SRC = os.environ.get("EVO_TEMPLATE", "kernels/attention.cu")
_nv = None
def nv():
    global _nv
    if _nv is None:
        _nv = ctypes.CDLL(LIB)
    return _nv

KEYS = ["HEAD_DIM","BF16","QK_MATH","PV_MATH","P_REGS","O_REGS","BLOCK_M","BLOCK_N","WARPS",
        "PRODUCER_WARPS","CP_ASYNC","STAGES","SMEM_LAYOUT","VEC_BYTES","EXP2","SPLIT_KV","MIN_BLOCKS"]

def smem_bytes(g):
    d=g["HEAD_DIM"]; bm=g["BLOCK_M"]; bn=g["BLOCK_N"]
    pitch = d + (8 if g["SMEM_LAYOUT"]==1 else 0)
    q = bm*pitch*2; kv = g["STAGES"]*2*bn*pitch*2
    sp = 0 if g["P_REGS"] else bm*(bn+4)*4 + bm*(bn+8)*2
    st = 3*bm*4; o = 0 if g["O_REGS"] else bm*(d+4)*4
    return q+kv+sp+st+o

def reg_acc(g):
    d=g["HEAD_DIM"]; bm=g["BLOCK_M"]; bn=g["BLOCK_N"]; w=g["WARPS"]
    sl = max(1, -(-bm//(16*w)))
    o = 0
    if g["O_REGS"]:
        o = sl*(d//8)*4 if g["PV_MATH"]==2 else -(-(bm*d)//(w*32))
    s = sl*(bn//8)*4 if g["P_REGS"] else 0
    return o+s

def valid(g, limit=227*1024):
    if g["P_REGS"] and (g["QK_MATH"]!=2 or g["PV_MATH"]!=2): return False
    if g["O_REGS"] and g["PV_MATH"]==1: return False
    if g["SMEM_LAYOUT"]==2 and (g["QK_MATH"]==1 or g["PV_MATH"]==1): return False
    regmma = g["P_REGS"] or (g["O_REGS"] and g["PV_MATH"]==2)
    if regmma and g["BLOCK_M"] % (16*g["WARPS"]): return False
    if reg_acc(g) > 255: return False
    if smem_bytes(g) > limit: return False
    return True

def options(g, arch="sm_90", maxreg=None, extra=()):
    o = ["--gpu-architecture="+arch, "-I"+INC, "--std=c++17", "-Xptxas=-v"]
    for k in KEYS: o.append("-DEVO_%s=%d" % (k, g[k]))
    o.append("-DEVO_SMEM_BYTES=%d" % smem_bytes(g))
    if maxreg: o.append("--maxrregcount=%d" % maxreg)
    return o + list(extra)

def compile_src(src, opts):
    n = nv(); prog = ctypes.c_void_p()
    r = n.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"attention.cu", 0, None, None)
    assert r == 0, r
    arr = (ctypes.c_char_p*len(opts))(*[x.encode() for x in opts])
    res = n.nvrtcCompileProgram(prog, len(opts), arr)
    sz = ctypes.c_size_t(); n.nvrtcGetProgramLogSize(prog, ctypes.byref(sz))
    buf = ctypes.create_string_buffer(sz.value); n.nvrtcGetProgramLog(prog, buf)
    n.nvrtcDestroyProgram(ctypes.byref(prog))
    return res, buf.value.decode(errors="replace")

def parse(log):
    """returns dict kernel -> (regs, spill_stores, spill_loads, stack)"""
    out = {}; cur = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m: cur = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur: out.setdefault(cur, {}).update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur: out.setdefault(cur, {})["regs"] = int(m.group(1))
    return out

def compile_genome(g, arch="sm_90", src=None):
    src = src or open(SRC).read()
    res, log = compile_src(src, options(g, arch))
    return res, log, parse(log)

if __name__ == "__main__":
    # usage: nvrtc_compile.py KEY=VAL ... [arch=sm_89]
    g = dict(HEAD_DIM=128,BF16=0,QK_MATH=2,PV_MATH=2,P_REGS=1,O_REGS=1,BLOCK_M=64,BLOCK_N=64,WARPS=4,
             PRODUCER_WARPS=0,CP_ASYNC=1,STAGES=2,SMEM_LAYOUT=2,VEC_BYTES=16,EXP2=1,SPLIT_KV=1,MIN_BLOCKS=1)
    arch = "sm_90"
    for a in sys.argv[1:]:
        k, v = a.split("=")
        if k == "arch": arch = v
        else: g[k] = int(v)
    res, log, p = compile_genome(g, arch)
    print(log); print(json.dumps(p)); print("valid" if valid(g) else "INVALID genome")
    if res != 0: print("COMPILE FAILED", res); sys.exit(1)
