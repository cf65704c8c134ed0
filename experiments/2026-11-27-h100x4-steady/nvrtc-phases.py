"""Where one NVRTC compile of a forward variant goes, on the development machine: the seed
shape's champion (genomes/champions/h100/b1-h8-l512-d64.toml, a Hopper genome) compiled as
the host compiles it (the template's files joined as crates/codegen/src/lib.rs joins them,
the genome's defines from `evo compile --emit defines`), with NVRTC's `-time` report, then
without the combine kernel a split-1 genome never launches, then the two CUDA headers the
template includes against an empty kernel.

Usage (repository root, after `bash scripts/test.sh` installed .nvrtc/ and built evo):
python3 experiments/2026-11-27-h100x4-steady/nvrtc-phases.py
"""
import ctypes
import os
import subprocess
import tempfile
import time

LIB = ctypes.CDLL(".nvrtc/nvidia/cu13/lib/libnvrtc.so.13")
FILES = ["mma.cuh", "sm90.cuh", "cluster.cuh", "attention_sm90.cu", "attention_sm90_roles.cuh",
         "attention_sm90_kernel.cuh", "combine.cuh"]
GENOME = "genomes/champions/h100/b1-h8-l512-d64.toml"


def source(files):
    text = open("kernels/mask.cuh").read()
    for f in files:
        text += '#line 1 "kernels/%s"\n' % f + open("kernels/" + f).read()
    return text.encode()


def compile_once(src, opts):
    prog = ctypes.c_void_p()
    assert LIB.nvrtcCreateProgram(ctypes.byref(prog), src, b"a.cu", 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t = time.time()
    assert LIB.nvrtcCompileProgram(prog, len(opts), arr) == 0
    return time.time() - t


defines = subprocess.run(["target/release/evo", "compile", GENOME, "--emit", "defines"],
                         capture_output=True, text=True, check=True).stdout.split()
base = ["--gpu-architecture=sm_90a", "--std=c++17", "-I.nvrtc/nvidia/cu13/include",
        "--ptxas-options=-v"]
with tempfile.TemporaryDirectory() as d:
    report = os.path.join(d, "time.csv")
    for label, src in [("whole", source(FILES)), ("without the combine", source(FILES[:-1]))]:
        walls = [compile_once(src, base + defines) for _ in range(3)]
        compile_once(src, base + defines + ["-time=" + report])
        phases = [l.strip() for l in open(report) if "ms" in l]
        print(f"{label}: {min(walls):.3f} s (best of 3); phases: {phases}")
        os.remove(report)
headers = b'#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nextern "C" __global__ void k(float* x) { x[0] = 1.f; }\n'
empty = b'extern "C" __global__ void k(float* x) { x[0] = 1.f; }\n'
for label, src in [("the two headers", headers), ("no header", empty)]:
    print(f"{label}: {min(compile_once(src, base[:3]) for _ in range(3)):.3f} s")
