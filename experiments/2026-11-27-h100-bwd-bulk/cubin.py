"""Compiles the Hopper backward template to a CUBIN with the NVRTC library at hand, the
way evo does (kernels/mask.cuh, mma.cuh, sm90.cuh, attention_bwd_sm90.cu,
attention_bwd_common.cuh, attention_bwd_sm90_wgmma.cuh, attention_bwd_sm90_kernel.cuh,
each behind a #line, for sm_90a), so that `cuobjdump -sass` can show the instructions
at the offsets compute-sanitizer names.

usage: python3 cubin.py LIBNVRTC INCLUDE_DIR OUT.cubin $(evo compile GENOME --head-dim D --emit defines)
"""
import ctypes
import os
import sys

lib_path, include, out = sys.argv[1:4]
defines = sys.argv[4:]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels")
files = ["mask.cuh", "mma.cuh", "sm90.cuh", "attention_bwd_sm90.cu", "attention_bwd_common.cuh",
         "attention_bwd_sm90_wgmma.cuh", "attention_bwd_sm90_kernel.cuh"]
src = "".join('#line 1 "kernels/%s"\n' % f + open(os.path.join(root, f)).read() + "\n" for f in files)
opts = ["--gpu-architecture=sm_90a", "--std=c++17", "-I" + include] + defines
lib = ctypes.CDLL(lib_path)
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"kernels/attention_bwd_sm90.cu", 0, None, None) == 0
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value)
lib.nvrtcGetProgramLog(prog, log)
if rc != 0:
    sys.exit("NVRTC failed:\n" + log.value.decode())
lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
cubin = ctypes.create_string_buffer(n.value)
lib.nvrtcGetCUBIN(prog, cubin)
open(out, "wb").write(cubin.raw)
