"""The timing and the reference of scripts/export_check.py, on torch and a GPU: FAST's
methods (a graph over input sets with L2 read over before each replay, single calls
between events, back-to-back replays) and sdpa_baseline's float64 reference in chunks.
Each function takes the torch module, so that importing this file needs no torch."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_baseline as sb  # noqa: E402  (L2Flush, hold, the reference; torch optional)


def median_min_max(xs):
    xs = sorted(xs)
    n = len(xs)
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return median, xs[0], xs[-1]


def chunked_reference(torch, q, k, v, mask):
    """sdpa_baseline's float64 reference, a few query heads at a time (L8192's scores in
    float64 for all 32 heads would take 16 GiB)."""
    b, h, lq, d = q.shape
    g = h // k.shape[1]
    out = torch.empty(b, h, lq, d, dtype=torch.float64, device=q.device)
    step = max(1, (1 << 27) // (lq * k.shape[2]))
    for bi in range(b):
        for h0 in range(0, h, step):
            h1 = min(h, h0 + step)
            kv_idx = torch.arange(h0, h1, device=q.device) // g
            out[bi:bi + 1, h0:h1] = sb.reference(
                q[bi:bi + 1, h0:h1], k[bi:bi + 1].index_select(1, kv_idx),
                v[bi:bi + 1].index_select(1, kv_idx), mask)
    return out


def time_b2b(torch, fn):
    """Median µs per call of `fn(i)` back to back in a graph (replays of >= 1 ms),
    captured on a stream of its own after warm-up calls on it (the runtime sizes a
    split-KV workspace per stream, and cannot grow it during a capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        spent = 0.0
        while spent < 25.0:
            start.record(); fn(0); end.record(); end.synchronize()
            spent += start.elapsed_time(end)
        start.record()
        for i in range(10):
            fn(i)
        end.record(); end.synchronize()
    calls = max(1, min(4096, math.ceil(1.0 / max(start.elapsed_time(end) / 10, 1e-6))))
    while True:  # as many calls as make a replay last 1 ms (the host's gaps inflated the estimate)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream, capture_error_mode="relaxed"):
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
    del g
    return median_min_max(per_call)[0]


def time_events(torch, fn, refresh, repeats=20):
    """FAST's events method: median µs of single calls `fn()`, each after `refresh()`
    drew the inputs again and behind a ~1 ms GPU spin (the host's dispatch falls outside
    the events)."""
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
        sb.hold()
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3)
    return median_min_max(per_call)[0]


def time_sets(torch, fn, sets, refresh, repeats=20):
    """FAST's graph method: one captured call per input set, the sets drawn again and
    L2 read over before each replay (sdpa_baseline.L2Flush: a write pass would leave L2
    full of dirty lines whose write-back lands in the timed replay; run X2 of
    experiments/2026-11-26-h100-readme-commands measured the decode rows 5-22% slower
    so); median µs per call."""
    flush = sb.L2Flush()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(sets):
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream, capture_error_mode="relaxed"):
        for i in range(sets):
            fn(i)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spent = 0.0
    while spent < 25.0:
        refresh(); flush()
        start.record(); g.replay(); end.record(); torch.cuda.synchronize()
        spent += start.elapsed_time(end)
    per_call = []
    for _ in range(repeats):
        refresh(); flush()
        start.record(); g.replay(); end.record(); torch.cuda.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3 / sets)
    del g, flush
    return median_min_max(per_call)[0]
