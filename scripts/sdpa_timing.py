"""The timing of scripts/sdpa_baseline.py (and so of the backward's baseline and of
export_timing.py), the way crates/gates/src/fast.rs times a kernel: a CUDA graph of
back-to-back calls, single calls between events for long ones, and cold-L2 calls. Needs
torch and a CUDA device; importing it without torch is fine (nothing runs)."""

import math

try:
    import torch
except ImportError:
    torch = None

L2_BYTES = 50 * 1024 * 1024


def spread(per_call):
    """(median, min, max) of the per-call times."""
    t = sorted(per_call)
    n = len(t)
    return (t[n // 2] if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2), t[0], t[-1]


# As FAST (crates/gates/src/fast.rs, `graph_below_us`): a call this long or longer is
# timed alone between two events, one per repeat, rather than back to back in a graph,
# so that evo's kernels and these baselines are timed alike (a long kernel run back to
# back can run at lower clocks than one timed alone).
EVENTS_FROM_US = 200.0
# A call timed alone between two events is enqueued behind a spin of this many GPU
# cycles (about 1 ms), so that the events measure the device's time only: after a
# synchronize the GPU is idle, and without it the start event would run at once and
# the interval would hold the host's dispatch of the call (PyTorch's SDPA, cuDNN's plan
# look-up: tens of µs, which inflated the library's figures). FAST's own events follow
# the device's input draw, which covers its (Rust) launch the same way.
HOLD_CYCLES = 2_000_000


def hold():
    """Keeps the GPU busy while the host enqueues the timed call (see HOLD_CYCLES)."""
    torch.cuda._sleep(HOLD_CYCLES)


def time_graph(fn, calls_hint=None):
    """(median, min, max) µs per call and the method: "graph" (replays of captured
    calls) or, for calls of EVENTS_FROM_US and more, "events" (single calls)."""
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
    if est_ms * 1e3 >= EVENTS_FROM_US:
        per_call = []
        flush = L2Flush()
        for i in range(20):
            flush()
            hold()
            start.record(); fn(i); end.record(); torch.cuda.synchronize()
            per_call.append(start.elapsed_time(end) * 1e3)
        return spread(per_call) + ("events",)
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
    return spread(per_call) + ("graph",)


class L2Flush:
    """A buffer twice the L2's size, read over before a call timed alone, as FAST's
    L2Flush (crates/gates/src/device/launch.rs): nothing the call reads is in L2, and
    L2 holds only clean lines (a write pass, `zero_()`, would leave up to 50 MB of dirty
    lines whose write-back lands in the timed call)."""

    def __init__(self):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size or L2_BYTES
        self.buf = torch.zeros(2 * l2 // 4, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buf.max()


def time_cold(fn, reps=20):
    """Per-call µs of single calls, each after L2 has been read over."""
    flush = L2Flush()
    for _ in range(3):
        fn(0)
    per_call = []
    for _ in range(reps):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hold()
        start.record()
        fn(0)
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3)
    del flush
    return spread(per_call)
