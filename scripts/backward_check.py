#!/usr/bin/env python3
"""evo's gradients against PyTorch's, through an export's Python module on a GPU.

For each shape (float16 and bfloat16, causal or not, grouped K/V heads, Lq != Lk, odd
lengths), dQ, dK and dV of `evo_attention.sdpa` under autograd (the champion's forward
with the log-sum-exp, the export's backward kernel) and of torch SDPA in the same dtype
are each compared with a float64 reference (torch's math path on the same inputs and
upstream gradient). evo passes a tensor when its relative Frobenius error is within
twice torch's own plus a small floor (the float16/bfloat16 rounding of one output
element): the claim is "as accurate as PyTorch's kernel", not "bitwise equal". Also
checked: the call ran evo's kernels (no fallback warning, `covers(..., requires_grad=
True)`), dK and dV of grouped heads are [B, Hkv, Lk, D], and a head dim without a
backward kernel falls back to torch with one warning and torch's gradients. Every head
dim evo builds has one in the recorded table, so that runs on a copy of the export
whose manifest lacks D256's backward entry, in a child process (this script with
--fallback-only) whose module reads the copy.

Usage: python3 scripts/backward_check.py EXPORT_DIR [--json OUT.json]
Exit status 0 when every check passes. Needs torch with CUDA and an export with its
runtime library (`evo export OUT --champions genomes/champions/h100 --cubin`).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

# (B, H, Hkv, Lq, Lk, D, dtype, causal)
SHAPES = [
    (2, 8, 8, 512, 512, 64, "bfloat16", True),
    (2, 8, 8, 512, 512, 64, "float16", False),
    (2, 8, 8, 1024, 1024, 128, "float16", True),
    (1, 16, 4, 1024, 1024, 128, "bfloat16", True),
    (2, 8, 2, 300, 300, 64, "float16", True),
    (1, 8, 8, 256, 640, 96, "bfloat16", True),
    (1, 4, 1, 333, 200, 128, "bfloat16", False),
    (1, 8, 4, 512, 512, 256, "bfloat16", True),
    (1, 4, 4, 300, 300, 256, "float16", False),
]
# The head dim whose backward entry the fallback check drops from a copy of the export.
FALLBACK_HEAD_DIM = 256
# Relative Frobenius error a dtype's rounding of the output alone makes.
FLOOR = {"float16": 2e-3, "bfloat16": 1.6e-2}


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def grads(torch, fn, q, k, v, do):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = fn(*leaves)
    out.backward(do)
    return [out.detach()] + [t.grad for t in leaves]


def without_backward(export_dir, tmp, head_dim):
    """A copy of the export under `tmp` whose manifest has no backward entry of
    `head_dim`; (its folder, how many entries were dropped)."""
    copy = os.path.join(tmp, "export")
    shutil.copytree(export_dir, copy)
    path = os.path.join(copy, "manifest.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    backward = data.get("backward", [])
    data["backward"] = [b for b in backward if b["head_dim"] != head_dim]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    return copy, len(backward) - len(data["backward"])


def fallback_check(torch, F, evo_attention, d):
    """On an export without a backward kernel of head dim `d`: the forward is covered,
    the gradient is not, `sdpa` under autograd says so once (naming the backward) and
    gives torch's gradients. Returns (failures, the warning)."""
    failures = []
    q = torch.randn(1, 4, 256, d, device="cuda", dtype=torch.bfloat16)
    do = torch.randn_like(q)
    if not evo_attention.covers(q, q, q, True, requires_grad=False):
        failures.append(f"D{d}: covers(requires_grad=False) is False: the forward champion is gone")
    if evo_attention.covers(q, q, q, True, requires_grad=True):
        failures.append(f"D{d}: covers(requires_grad=True) is True without a backward kernel")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = grads(torch, lambda q, k, v: evo_attention.sdpa(q, k, v, is_causal=True), q, q, q, do)
        grads(torch, lambda q, k, v: evo_attention.sdpa(q, k, v, is_causal=True), q, q, q, do)
    messages = [str(w.message) for w in caught]
    theirs = grads(torch, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                   q, q, q, do)
    if (len(messages) != 1 or "backward kernels cover" not in messages[0]
            or f"head dim {d}" not in messages[0]):
        failures.append(f"D{d}: expected one fallback warning naming the backward, got {messages}")
    # torch's own backward adds with atomics: equal up to its run-to-run spread.
    if any(rel(x, y.double()) > 1e-3 for x, y in zip(ours, theirs)):
        failures.append(f"D{d}: the fallback's gradients are not torch's")
    return failures, messages[0] if messages else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("export_dir")
    parser.add_argument("--json", help="write the rows here")
    # The child's part: only the fallback check, on EXPORT_DIR, one JSON line out.
    parser.add_argument("--fallback-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.join(args.export_dir, "python"))
    os.environ["EVO_EXPORT_DIR"] = args.export_dir
    import evo_attention

    torch.manual_seed(0)
    if args.fallback_only:
        failures, message = fallback_check(torch, F, evo_attention, FALLBACK_HEAD_DIM)
        print(json.dumps({"failures": failures, "message": message}))
        return 0
    rows, failures = [], []
    names = ["o", "dq", "dk", "dv"]
    for b, h, hkv, lq, lk, d, dtype_name, causal in SHAPES:
        dtype = getattr(torch, dtype_name)
        gqa = hkv != h
        q = torch.randn(b, h, lq, d, device="cuda", dtype=dtype)
        k = torch.randn(b, hkv, lk, d, device="cuda", dtype=dtype)
        v = torch.randn(b, hkv, lk, d, device="cuda", dtype=dtype)
        do = torch.randn(b, h, lq, d, device="cuda", dtype=dtype)
        label = f"B{b} H{h} Hkv{hkv} Lq{lq} Lk{lk} D{d} {dtype_name}{' causal' if causal else ''}"
        covered = evo_attention.covers(q, k, v, causal, enable_gqa=gqa, requires_grad=True)
        if not covered:
            failures.append(f"{label}: covers(requires_grad=True) is False")

        def evo(q, k, v):
            return evo_attention.sdpa(q, k, v, is_causal=causal, enable_gqa=gqa)

        def sdpa(q, k, v):
            if gqa:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = grads(torch, evo, q, k, v, do)
        if caught:
            failures.append(f"{label}: fell back: {[str(w.message) for w in caught]}")
        theirs = grads(torch, sdpa, q, k, v, do)
        # float64 runs on torch's math path (no fused kernel takes it).
        ref = grads(torch, sdpa, q.double(), k.double(), v.double(), do.double())
        if tuple(ours[2].shape) != tuple(k.shape) or tuple(ours[3].shape) != tuple(v.shape):
            failures.append(f"{label}: dK/dV shapes {tuple(ours[2].shape)}, {tuple(ours[3].shape)}")
        row = {"shape": label}
        for name, x, y, r in zip(names, ours, theirs, ref):
            e_evo, e_torch = rel(x, r), rel(y, r)
            bound = 2 * e_torch + FLOOR[dtype_name]
            finite = bool(torch.isfinite(x).all())
            row[name] = {"evo": e_evo, "torch": e_torch, "bound": bound,
                         "max_abs_vs_torch": (x.double() - y.double()).abs().max().item()}
            if not finite or not e_evo <= bound:
                failures.append(f"{label}: {name} error {e_evo:.3e} > {bound:.3e} "
                                f"(torch {e_torch:.3e}){'' if finite else ', not finite'}")
        rows.append(row)
        print(f"{label:48s} " + "  ".join(
            f"{n} {row[n]['evo']:.2e}/{row[n]['torch']:.2e}" for n in names), flush=True)

    # A head dim without a backward kernel: torch's gradient, said once. The module
    # reads its export once, so the copy without the entry is checked in a child.
    d = FALLBACK_HEAD_DIM
    with tempfile.TemporaryDirectory() as tmp:
        copy, dropped = without_backward(args.export_dir, tmp, d)
        if dropped != 1:
            failures.append(f"D{d}: the export has {dropped} backward entries of it, not 1")
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), copy, "--fallback-only"],
            capture_output=True, text=True, env=dict(os.environ, EVO_EXPORT_DIR=copy),
        )
    try:
        result = json.loads(child.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = {"failures": [f"D{d} fallback: the check did not finish (exit status "
                               f"{child.returncode}): {child.stdout[-2000:]}{child.stderr[-2000:]}"],
                  "message": None}
    failures.extend(result["failures"])
    print(f"D{d} without its backward entry falls back: {result['message'] or '(no warning)'}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "failures": failures,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__}, f,
                      indent=1)
    for f in failures:
        print(f"FAIL {f}")
    print("backward check: " + ("passed" if not failures else f"{len(failures)} failures"))
    return 0 if not failures else 1



if __name__ == "__main__":
    sys.exit(main())
