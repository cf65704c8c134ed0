#!/usr/bin/env python3
"""Run P1's probe: the exported seed-row champions (B1 H8 L512 D64 f16, causal and not)
time 3-5% above `evo bench` by FAST's own graph method (experiments/2026-11-25-h100-record,
R6-R9). The kernel, its CUBIN and its launch are the same code (see README.md); what
differs is around it. Each variant below flips ONE such difference from
scripts/export_check.py's graph method ("base") towards FAST's, and "fast" flips them all;
every variant is timed in this one process, interleaved round by round (rounds rotate
the order), each figure the median per call of 20 replays of one captured call per
input set (50 sets), sets redrawn and L2 written over before each replay.

Usage: python3 probe4.py EXPORT_DIR [--rounds 7] [--seed 2026]
"""
import argparse
import ctypes
import hashlib
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import export_check as xc  # noqa: E402

# FAST's draw (crates/gates/src/philox.rs, kernels/verify.cu `evo_draw`): the centred sum
# 2(u0+u1+u2+u3) - 4*65535 of four 16-bit uniforms times value_scale(1), rounded to f16.
SCALE = 1.0 / (2.0 * math.sqrt((65536.0 * 65536.0 - 1.0) / 3.0))
# FAST's O slots (crates/gates/src/inputs.rs): each O followed by a 128x128 guard, all
# poisoned with these bits before every repeat (crates/gates/src/device/rig.rs).
GUARD_ELEMS, POISON, GUARD_BITS = 128 * 128, 0x7E5A, 0x7D3C
B, H, L, D = 1, 8, 512, 64

VARIANTS = {  # name: (flags, what differs from base)
    "base": ({}, "export_check.py: randn, set i = (q_i,k_i,v_i,o_i), torch fill flush, legacy stream"),
    "ih": ({"ih": True}, "inputs as FAST draws them: Irwin-Hall(4) integer sums x value_scale(1)"),
    "perm": ({"perm": True}, "slots paired by four independent random permutations"),
    "guard": ({"guard": True}, "O slots 32 KiB apart (guard), poisoned before each replay"),
    "memset": ({"memset": True}, "L2 flush by cuMemsetD8Async (FAST) instead of zero_()"),
    "stream": ({"stream": True}, "draw, flush, replay, events on a non-blocking stream"),
    "pool": ({"pool": True}, "Q/K/V/O/flush from cuMemAllocAsync's pool (cudarc) not torch's"),
    "held": ({"held": True}, "~1 ms GPU spin before the start event (no host gap timed)"),
    "fast": ({"ih": True, "perm": True, "guard": True, "memset": True, "stream": True,
              "pool": True}, "all of ih perm guard memset stream pool"),
    "events": ({"events": True}, "export_check.py's events method (held single call), randn"),
    "events-ih": ({"events": True, "ih": True}, "the same, FAST's inputs"),
}


class Driver:
    """The few driver calls FAST makes that torch does not (libcuda, the thread's context)."""

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuMemAllocAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p]
        self.cu.cuMemFreeAsync.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
        self.cu.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]

    def _ok(self, r, what):
        if r:
            raise RuntimeError(f"{what}: CUresult {r}")

    def alloc(self, nbytes, stream):
        p = ctypes.c_uint64()
        self._ok(self.cu.cuMemAllocAsync(ctypes.byref(p), nbytes, stream), "cuMemAllocAsync")
        return p.value

    def free(self, ptr, stream):
        self._ok(self.cu.cuMemFreeAsync(ptr, stream), "cuMemFreeAsync")

    def memset(self, ptr, nbytes, stream):  # what FAST's L2Flush does (cudarc memset_zeros)
        self._ok(self.cu.cuMemsetD8Async(ptr, 0, nbytes, stream), "cuMemsetD8Async")


class Raw:
    """A pool allocation torch can view (it does not own it)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "strides": None, "version": 2}


class Setup:
    """The input sets, O slots, flush buffer, stream and draws of one variant."""

    def __init__(self, torch, drv, flags, seed):
        self.torch, self.drv, self.flags, self.owned = torch, drv, flags, []
        self.n = n = xc.input_sets(B, H, L, L, D)
        qe = B * H * L * D
        self.st = torch.cuda.Stream() if flags.get("stream") else torch.cuda.current_stream()
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        l2 = torch.cuda.get_device_properties(0).L2_cache_size or xc.L2_BYTES
        with torch.cuda.stream(self.st):
            self.ins = [self.alloc(2 * n * qe).view(torch.float16) for _ in range(3)]
            ostride = qe + (GUARD_ELEMS if flags.get("guard") else 0)
            self.o = self.alloc(2 * n * ostride).view(torch.float16)
            self.fresh = None
            if flags.get("guard"):
                f = torch.full((n, ostride), POISON, dtype=torch.int16, device="cuda")
                f[:, qe:] = GUARD_BITS
                self.fresh = f.view(torch.float16).reshape(-1)
            self.flush_buf = self.alloc(2 * l2)
            perms = [list(range(n)) for _ in range(4)]
            if flags.get("perm"):
                rng = random.Random(seed)
                for p in perms:
                    rng.shuffle(p)
            view = lambda t, i, s: t[i * s: i * s + qe].view(B, H, L, D)  # noqa: E731
            self.sets = [(view(self.ins[0], perms[0][i], qe), view(self.ins[1], perms[1][i], qe),
                          view(self.ins[2], perms[2][i], qe), view(self.o, perms[3][i], ostride))
                         for i in range(n)]
            self.refresh()
        torch.cuda.synchronize()

    def alloc(self, nbytes):
        torch = self.torch
        if not self.flags.get("pool"):
            return torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        p = self.drv.alloc(nbytes, self.st.cuda_stream)
        self.owned.append(p)
        return torch.as_tensor(Raw(p, nbytes), device="cuda")

    def draw(self, t):
        torch = self.torch
        if self.flags.get("ih"):
            s = torch.randint(0, 65536, (4, t.numel()), generator=self.gen, dtype=torch.int32,
                              device="cuda").sum(0, dtype=torch.int32)
            t.view(-1).copy_((2 * s - 4 * 65535).float() * SCALE)
        else:
            t.normal_(generator=self.gen)

    def refresh(self):
        for t in self.ins:
            self.draw(t)
        if self.fresh is not None:
            self.o.copy_(self.fresh)

    def refresh0(self):  # the events method draws set 0 only
        for t in self.sets[0][:3]:
            self.draw(t)

    def flush(self):
        if self.flags.get("memset"):
            self.drv.memset(self.flush_buf.data_ptr(), self.flush_buf.numel(), self.st.cuda_stream)
        else:
            self.flush_buf.zero_()

    def close(self):
        self.torch.cuda.synchronize()
        self.ins = self.o = self.fresh = self.flush_buf = self.sets = None
        for p in self.owned:
            self.drv.free(p, self.st.cuda_stream)
        self.torch.cuda.synchronize()


def time_graph(torch, ea, s, causal, repeats=20):
    """export_check.time_sets_graph, on the setup's stream, flush and draws."""
    call = lambda i: ea.forward(*s.sets[i][:3], s.sets[i][3], is_causal=causal)  # noqa: E731
    with torch.cuda.stream(s.st):
        side = torch.cuda.Stream()
        side.wait_stream(s.st)
        with torch.cuda.stream(side):
            for i in range(s.n):
                call(i)
        s.st.wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="relaxed"):
            for i in range(s.n):
                call(i)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def once():
            s.refresh()
            s.flush()
            if s.flags.get("held"):
                torch.cuda._sleep(xc.HOLD_CYCLES)
            start.record(); g.replay(); end.record(); torch.cuda.synchronize()
            return start.elapsed_time(end) * 1e3 / s.n

        spent = 0.0
        while spent < 25.0:
            spent += once() * s.n / 1e3
        per_call = [once() for _ in range(repeats)]
    return xc.median_min_max(per_call)


def time_events(torch, ea, s, causal):
    """export_check.time_events (a GPU spin, then one call between two events)."""
    q, k, v, o = s.sets[0]
    with torch.cuda.stream(s.st):
        return xc.time_events(torch, lambda: ea.forward(q, k, v, o, is_causal=causal), s.refresh0)


def clock(torch):
    try:
        return f"{torch.cuda.clock_rate()} MHz"
    except Exception:  # noqa: BLE001  (pynvml missing, or an older torch)
        return "clock n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.export, "python"))
    import torch
    import evo_attention as ea

    drv = Driver()
    m = ea.manifest()
    print(f"{torch.cuda.get_device_name(0)}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
          f"export {m.data['arch']}, NVRTC {m.data['nvrtc_version']}; {clock(torch)}", flush=True)
    for causal in (False, True):
        c = m.choose(B, H, L, L, D, causal)
        k = next(k for k in c["kernels"] if k["dtype"] == "f16")
        blob = open(os.path.join(args.export, k["cubin"] or k["ptx"]), "rb").read()
        print(f"causal={causal}: class {c['class']}, genome {c['genome']} ({c['genome_id']}, {c['family']}), "
              f"{k['arch']}, {k['cubin'] or k['ptx']} sha256 {hashlib.sha256(blob).hexdigest()[:16]}")
        for name in ("base", "fast"):  # the views and pool allocations compute right
            s = Setup(torch, drv, VARIANTS[name][0], args.seed)
            q, kk, v, o = s.sets[3]
            with torch.cuda.stream(s.st):
                ea.forward(q, kk, v, o, is_causal=causal)
            torch.cuda.synchronize()
            ref = xc.reference(torch, q, kk, v, causal)
            rel = ((o.double() - ref).norm() / ref.norm()).item()
            print(f"  {name}: rel_frob of set 3 vs float64 {rel:.2e}", flush=True)
            del q, kk, v, o, ref
            s.close()

    names = list(VARIANTS)
    res = {(c, n): [] for c in (False, True) for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for causal in (False, True):
            for name in order:
                flags = VARIANTS[name][0]
                s = Setup(torch, drv, flags, args.seed + 1000 * r)
                f = time_events if flags.get("events") else time_graph
                res[(causal, name)].append(f(torch, ea, s, causal)[0])
                s.close()
            print(f"round {r} causal={causal!s:<5} {clock(torch):>10}  " + "  ".join(
                f"{n} {res[(causal, n)][-1]:.3f}" for n in names), flush=True)

    print("\nP1 summary: µs per call, median [min, max] of the rounds' medians; ratio = median "
          "over rounds of variant / base of the same round")
    print(f"{'row':<8} {'variant':<10} {'median':>7} {'min':>7} {'max':>7} {'ratio':>6}  what differs from base")
    for causal in (False, True):
        base = res[(causal, "base")]
        for name in names:
            v = res[(causal, name)]
            med, lo, hi = xc.median_min_max(v)
            ratio = xc.median_min_max([a / b for a, b in zip(v, base)])[0]
            print(f"{'causal' if causal else 'full':<8} {name:<10} {med:7.3f} {lo:7.3f} {hi:7.3f} "
                  f"{ratio:6.3f}  {VARIANTS[name][1]}")


if __name__ == "__main__":
    main()
