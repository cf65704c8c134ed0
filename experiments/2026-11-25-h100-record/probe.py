#!/usr/bin/env python3
"""Run R2's probe: why an exported champion times slower under scripts/export_check.py
than the same champion under `evo bench` (run R1: B1 H16 L8192 D128 891.6 vs 808.7 µs,
B2 H16 L4096 D128 467.6 vs 428.6 µs, both timed one call at a time with events).

Times the two champions of an export, and cuDNN beside them, under variations of
export_check.py's events method: the inputs drawn again before each call or not, with
an idle gap between calls, with uniform instead of normal inputs, with the call enqueued
behind a GPU spin (so the host's dispatch falls outside the events), and graph-timed;
the SM clock, power and temperature are read (nvidia-smi) around each figure.

Usage: python3 probe.py EXPORT_DIR TAG
"""
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import export_check as xc  # noqa: E402


def smi():
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
         "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout.strip()
    return out.replace(", ", "/")


def events(torch, fn, refresh, gap_s=0.0, repeats=20, hold=False):
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spent = 0.0
    while spent < 25.0:
        refresh()
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        spent += start.elapsed_time(end)
    per_call = []
    for _ in range(repeats):
        refresh()
        if gap_s:
            torch.cuda.synchronize(); time.sleep(gap_s)
        if hold:
            torch.cuda._sleep(xc.HOLD_CYCLES)
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3)
    per_call.sort()
    return per_call[len(per_call) // 2], per_call[0], per_call[-1]


def main():
    export, tag = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(export, "python"))
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import evo_attention

    for (b, h, l, d) in [(1, 16, 8192, 128), (2, 16, 4096, 128)]:
        gen = torch.Generator(device="cuda").manual_seed(2026)
        q, k, v = (torch.randn(b, h, l, d, device="cuda", generator=gen).to(torch.float16)
                   for _ in range(3))
        o = torch.empty_like(q)
        ours = lambda: evo_attention.forward(q, k, v, o, is_causal=False)  # noqa: E731
        cudnn_out = []

        def cudnn():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                cudnn_out.append(F.scaled_dot_product_attention(q, k, v))
                cudnn_out.clear()

        def normal():
            for t in (q, k, v):
                t.normal_(generator=gen)

        def uniform():
            for t in (q, k, v):
                t.uniform_(-math.sqrt(3), math.sqrt(3), generator=gen)

        def after_reference(fn):
            ref = xc.reference(torch, q, k, v, False)
            torch.cuda.synchronize()
            del ref
            return events(torch, fn, normal, hold=True)

        rows = [
            ("evo events, held, right after a float64 reference", lambda: after_reference(ours)),
            ("cuDNN events, held, right after a float64 reference", lambda: after_reference(cudnn)),
            ("evo events, normal drawn before each", lambda: events(torch, ours, normal)),
            ("cuDNN events, normal drawn before each", lambda: events(torch, cudnn, normal)),
            ("evo events, inputs kept", lambda: events(torch, ours, lambda: None)),
            ("evo events, normal drawn, 5 ms idle before each", lambda: events(torch, ours, normal, 0.005)),
            ("cuDNN events, normal drawn, 5 ms idle before each", lambda: events(torch, cudnn, normal, 0.005)),
            ("evo events, uniform drawn before each", lambda: events(torch, ours, uniform)),
            ("evo events, normal drawn, held (GPU spin first)", lambda: events(torch, ours, normal, hold=True)),
            ("cuDNN events, normal drawn, held (GPU spin first)", lambda: events(torch, cudnn, normal, hold=True)),
            ("evo graph (back to back)", lambda: xc.time_graph(torch, lambda i: ours())),
            ("cuDNN graph (back to back)", lambda: xc.time_graph(torch, lambda i: cudnn())),
            ("evo events, normal drawn before each (again)", lambda: events(torch, ours, normal)),
        ]
        for label, f in rows:
            before = smi()
            med, lo, hi = f()
            print(f"{tag} B{b} H{h} L{l} D{d}  {label:<52} {med:8.2f} µs [{lo:.2f}, {hi:.2f}]  "
                  f"smi before {before} after {smi()}", flush=True)
        del q, k, v, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
