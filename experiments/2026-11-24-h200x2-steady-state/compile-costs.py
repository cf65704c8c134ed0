#!/usr/bin/env python3
"""Where a compile's time goes, and whether run M1 compiled any kernel twice.

Run from the repository root after `cargo build --release` and `just nvrtc` (NVRTC in
.nvrtc/): python3 experiments/2026-11-24-h200x2-steady-state/compile-costs.py
Writes nothing; its output is kept beside it (compile-costs.txt). The timings are this
machine's (one thread each), not the two-GPU host's.
"""
import collections, ctypes, glob, json, os, platform, subprocess, sys, tarfile, tempfile, time

EVO = "target/release/evo"
NVRTC = glob.glob(".nvrtc/nvidia/cu*/lib/libnvrtc.so.*")[0]
INCLUDE = "-I" + glob.glob(".nvrtc/nvidia/cu*/include")[0]
HOPPER = ["mask.cuh", "cluster.cuh", "attention_sm90.cu", "attention_sm90_roles.cuh",
          "attention_sm90_kernel.cuh", "combine.cuh"]
lib = ctypes.CDLL(NVRTC)
env = dict(os.environ, EVO_NVRTC_DIR=os.path.abspath(".nvrtc"))


def compile_seconds(src, opts):
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    start = time.time()
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    seconds = time.time() - start
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    assert rc == 0, f"NVRTC failed ({rc}) with {opts}"
    return seconds


def median3(src, opts):
    return sorted(compile_seconds(src, opts) for _ in range(3))[1]


def defines(genome_toml, head_dim):
    out = subprocess.run([EVO, "compile", genome_toml, "--head-dim", str(head_dim), "--emit",
                          "defines"], capture_output=True, text=True, env=env)
    return out.stdout.split() if out.returncode == 0 else None


print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; {NVRTC}")

# 1. Did a run compile one kernel twice? Distinct define sets (D64) of its genomes.
with tempfile.TemporaryDirectory() as tmp:
    tarfile.open("experiments/2026-11-24-h200x2-steady-state/m1/runs-seed.tgz").extractall(tmp)
    for run in ["seed-gpus01-a", "seed-gpus0-b"]:
        seen, genomes = collections.Counter(), {}
        for line in open(f"{tmp}/{run}/evaluations.jsonl"):
            e = json.loads(line)["evaluation"]
            genomes[e["genome_id"]] = e["genome"]
        for gid, genes in genomes.items():
            path = f"{tmp}/g.toml"
            with open(path, "w") as f:
                f.write('name = "g"\n[genes]\n')
                for k, v in genes.items():
                    f.write(f'{k} = "{v}"\n' if isinstance(v, str) else f"{k} = {v}\n")
            seen[" ".join(defines(path, 64) or ["invalid"])] += 1
        print(f"{run}: {len(genomes)} genomes, {len(seen)} distinct define sets")

# 2. Where one compile's time goes: FA3's genome at D128, sm_90a.
fa3 = defines("genomes/fa3.toml", 128)
full = "".join(open("kernels/" + f).read() for f in HOPPER).encode()
no_combine = "".join(open("kernels/" + f).read() for f in HOPPER[:-1]).encode()
base = ["--std=c++17", INCLUDE] + fa3
cubin = ["--gpu-architecture=sm_90a", "--ptxas-options=-v"] + base
headers = b"#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n__global__ void k(){}"
print(f"empty kernel with cuda_fp16.h and cuda_bf16.h, CUBIN: {median3(headers, ['--gpu-architecture=sm_90a', '--std=c++17', INCLUDE]):.3f} s")
print(f"fa3 D128 PTX only (front end and NVVM): {median3(full, ['--gpu-architecture=compute_90a'] + base):.3f} s")
print(f"fa3 D128 CUBIN: {median3(full, cubin):.3f} s")
print(f"fa3 D128 CUBIN, --pch: {median3(full, cubin + ['--pch']):.3f} s")
print(f"fa3 D128 CUBIN, --minimal: {median3(full, cubin + ['--minimal']):.3f} s")
print(f"fa3 D128 CUBIN without the combine kernel: {median3(no_combine, cubin):.3f} s")
with tempfile.TemporaryDirectory() as tmp:
    compile_seconds(full, cubin + [f"--fdevice-time-trace={tmp}/trace.json"])
    trace = glob.glob(f"{tmp}/trace.json*")[0]
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    longest = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name") in ("NVVM Optimizer", "Total PTXAS Time", "LibNVVM"):
            longest[e["name"]] = max(longest.get(e["name"], 0), e["dur"] / 1e3)
    for name, ms in sorted(longest.items()):
        print(f"time trace, {name}: {ms:.0f} ms")
