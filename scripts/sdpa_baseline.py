#!/usr/bin/env python3
"""PyTorch SDPA baselines for `evo bench`: per backend (cuDNN, flash, efficient),
graph-timed the way the FAST gate times a kernel, with its errors against a float64
reference on the same inputs (tolerance calibration).

Usage:
  sdpa_baseline.py --shapes '[{"batch":1,"heads":8,"q_len":512,"kv_len":512,
                               "head_dim":64,"dtype":"f16","causal":false}]'
                   [--seed N] [--q-gain G] [--backends cudnn,flash,efficient] [--cold-l2]

Prints notes on stderr and one JSON array on the last line of stdout, one object per
(shape, backend): backend, problem, device, median_us, min_us, max_us, tflops,
rel_frob, max_abs, error (null unless the backend refused the shape), timing ("graph";
with --cold-l2 each backend also gets a "cold-l2" row).

Timing (as crates/gates/src/fast.rs): warm-up 25 ms; N calls captured in one CUDA
graph, N chosen so a replay lasts >= 1 ms; 20 replays, each between two events;
median/min/max per call. When one input set (Q, K, V, O) is under L2 (50 MB) the
captured calls rotate among ceil(2 * 50 MB / set bytes) sets (at most 64), so the
inputs are not L2-resident. TFLOP/s = 4*B*H*Lq*Lk*D / t, halved for causal.
Cold L2 (--cold-l2, as FAST's cold-l2 method): 20 single calls, each between two events
after zeroing a buffer twice the L2's size; median/min/max.
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

L2_BYTES = 50 * 1024 * 1024
MAX_SETS = 64
BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def flops(p):
    f = 4.0 * p["batch"] * p["heads"] * p["q_len"] * p["kv_len"] * p["head_dim"]
    return f / 2 if p.get("causal") else f


def input_sets(p):
    q = p["batch"] * p["heads"] * p["q_len"] * p["head_dim"]
    kv = p["batch"] * p["heads"] * p["kv_len"] * p["head_dim"]
    nbytes = 2 * (2 * q + 2 * kv)
    if nbytes >= L2_BYTES:
        return 1
    return max(1, min(MAX_SETS, math.ceil(2 * L2_BYTES / nbytes)))


def reference(q, k, v, causal):
    """float64 softmax(QK^T/sqrt(D) + top-left causal mask) V."""
    qd, kd, vd = q.double(), k.double(), v.double()
    s = qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = s.shape[-2], s.shape[-1]
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ vd


def time_graph(fn, calls_hint=None):
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # warm-up (25 ms) and a single-call estimate
    spent = 0.0
    while spent < 25.0:
        start.record(); fn(0); end.record(); torch.cuda.synchronize()
        spent += start.elapsed_time(end)
    start.record()
    for i in range(10):
        fn(i)
    end.record(); torch.cuda.synchronize()
    est_ms = start.elapsed_time(end) / 10
    calls = max(1, min(4096, math.ceil(1.0 / max(est_ms, 1e-6))))
    while True:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(3):
                fn(i)
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(calls):
                fn(i)
        g.replay(); torch.cuda.synchronize()
        start.record(); g.replay(); end.record(); torch.cuda.synchronize()
        ms = start.elapsed_time(end)
        if ms >= 1.0 or calls >= 4096:
            break
        calls = min(4096, max(calls + 1, math.ceil(calls * 1.1 / max(ms, 1e-6))))
    per_call = []
    for _ in range(20):
        start.record(); g.replay(); end.record(); torch.cuda.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3 / calls)
    per_call.sort()
    n = len(per_call)
    median = per_call[n // 2] if n % 2 else (per_call[n // 2 - 1] + per_call[n // 2]) / 2
    return median, per_call[0], per_call[-1]


def time_cold(fn, reps=20):
    """Per-call µs of single calls, each after L2 has been overwritten."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size or L2_BYTES
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fn(0)
    per_call = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(0)
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3)
    del flush
    per_call.sort()
    n = len(per_call)
    median = per_call[n // 2] if n % 2 else (per_call[n // 2 - 1] + per_call[n // 2]) / 2
    return median, per_call[0], per_call[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="JSON list of evo Problem objects")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--q-gain", type=float, default=1.0, help="multiply Q (large-logit cases)")
    ap.add_argument("--backends", default="cudnn,flash,efficient")
    ap.add_argument("--no-timing", action="store_true", help="errors only (calibration)")
    ap.add_argument("--cold-l2", action="store_true", help="also time single calls on a cold L2")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    device = torch.cuda.get_device_name(0)
    results = []
    for p in json.loads(args.shapes):
        dtype = DTYPES[p["dtype"]]
        b, h, lq, lk, d = p["batch"], p["heads"], p["q_len"], p["kv_len"], p["head_dim"]
        causal = bool(p.get("causal", False))
        gen = torch.Generator(device="cuda").manual_seed(args.seed)
        q = (torch.randn(b, h, lq, d, device="cuda", generator=gen) * args.q_gain).to(dtype)
        k = torch.randn(b, h, lk, d, device="cuda", generator=gen).to(dtype)
        v = torch.randn(b, h, lk, d, device="cuda", generator=gen).to(dtype)
        ref = reference(q, k, v, causal)
        for name in args.backends.split(","):
            row = {"backend": name, "problem": p, "device": device, "median_us": None,
                   "min_us": None, "max_us": None, "tflops": None, "rel_frob": None,
                   "max_abs": None, "error": None, "timing": "graph"}
            cold = dict(row, timing="cold-l2")
            try:
                with sdpa_kernel([BACKENDS[name]]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.cuda.synchronize()
                    diff = out.double() - ref
                    row["rel_frob"] = (diff.norm() / ref.norm()).item()
                    row["max_abs"] = diff.abs().max().item()
                    if not torch.isfinite(out).all():
                        raise ValueError("the output has NaN or Inf")
                    if not args.no_timing:
                        sets = [(q, k, v)] + [(q.clone(), k.clone(), v.clone()) for _ in range(input_sets(p) - 1)]
                        fn = lambda i: F.scaled_dot_product_attention(*sets[i % len(sets)], is_causal=causal)
                        med, lo, hi = time_graph(fn)
                        row.update(median_us=med, min_us=lo, max_us=hi, tflops=flops(p) / (med * 1e-6) / 1e12)
                        if args.cold_l2:
                            med, lo, hi = time_cold(fn)
                            cold.update(median_us=med, min_us=lo, max_us=hi,
                                        tflops=flops(p) / (med * 1e-6) / 1e12)
                        del sets, fn
            except Exception as e:  # a backend that refuses a shape (e.g. flash and some dtypes)
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"sdpa {name} {p}: {row['median_us']} us, rel_frob {row['rel_frob']}, "
                  f"error {row['error']}", file=sys.stderr)
            results.append(row)
            if args.cold_l2:
                cold.update(rel_frob=row["rel_frob"], max_abs=row["max_abs"], error=row["error"])
                results.append(cold)
        del q, k, v, ref
        torch.cuda.empty_cache()
    print(json.dumps(results, allow_nan=False))


if __name__ == "__main__":
    main()
