#!/usr/bin/env python3
"""Run P3's probe. P2 found the exported seed-row champion 0.58 µs a call faster through
the C ABI in a process without PyTorch (6.72 µs, probe5.c) than through the Python module
(7.30 µs, torch.cuda.graph), with the kernel itself the same under ncu. This probe keeps
the PyTorch process and the Python module and changes only how the graph of one call per
input set (50 sets) is built and launched:

  torch        torch.cuda.graph capture, g.replay()              (export_check.py, P1 base)
  torch-drv    the same torch graph's executable, launched by cuGraphLaunch (no replay())
  drv          captured by cuStreamBeginCapture (relaxed) on a side stream, instantiated
               with flags 0, uploaded, launched by cuGraphLaunch   (FAST, probe5.c)
  drv-autofree the same, instantiated with AUTO_FREE_ON_LAUNCH    (what torch passes)

Each figure: probe4.py's base setup (randn inputs, legacy stream, torch fill flush), 20
replays after 25 ms of warm-up, median µs per call; variants interleaved, order rotated
each round. Also prints each graph's node count and types.

Usage: python3 probe6.py EXPORT [--rounds 5]
"""
import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import probe4  # noqa: E402

cu = ctypes.CDLL("libcuda.so.1")
VP, U64 = ctypes.c_void_p, ctypes.c_uint64
cu.cuStreamBeginCapture_v2.argtypes = [VP, ctypes.c_int]
cu.cuStreamEndCapture.argtypes = [VP, ctypes.POINTER(VP)]
cu.cuGraphInstantiateWithFlags.argtypes = [ctypes.POINTER(VP), VP, ctypes.c_ulonglong]
cu.cuGraphUpload.argtypes = [VP, VP]
cu.cuGraphLaunch.argtypes = [VP, VP]
cu.cuGraphGetNodes.argtypes = [VP, ctypes.POINTER(VP), ctypes.POINTER(ctypes.c_size_t)]
cu.cuGraphNodeGetType.argtypes = [VP, ctypes.POINTER(ctypes.c_int)]
cu.cuGraphExecDestroy.argtypes = [VP]
cu.cuGraphDestroy.argtypes = [VP]
RELAXED, AUTO_FREE = 2, 1
NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty",
              6: "wait_event", 7: "event_record", 10: "mem_alloc", 11: "mem_free"}


def ok(r, what):
    if r:
        raise RuntimeError(f"{what}: CUresult {r}")


def node_types(graph):
    n = ctypes.c_size_t(0)
    ok(cu.cuGraphGetNodes(graph, None, ctypes.byref(n)), "cuGraphGetNodes")
    nodes = (VP * n.value)()
    ok(cu.cuGraphGetNodes(graph, nodes, ctypes.byref(n)), "cuGraphGetNodes")
    kinds = {}
    for i in range(n.value):
        t = ctypes.c_int()
        ok(cu.cuGraphNodeGetType(nodes[i], ctypes.byref(t)), "cuGraphNodeGetType")
        name = NODE_TYPES.get(t.value, str(t.value))
        kinds[name] = kinds.get(name, 0) + 1
    return n.value, kinds


class Graph:
    """One call per set captured and instantiated as `how` says; launch() on stream."""

    def __init__(self, torch, ea, s, causal, how):
        self.torch, self.how, self.g, self.exec, self.graph = torch, how, None, None, None
        call = lambda i: ea.forward(*s.sets[i][:3], s.sets[i][3], is_causal=causal)  # noqa: E731
        with torch.cuda.stream(s.st):
            side = torch.cuda.Stream()
            side.wait_stream(s.st)
            with torch.cuda.stream(side):
                for i in range(s.n):
                    call(i)
            s.st.wait_stream(side)
            torch.cuda.synchronize()
            if how.startswith("torch"):
                keep = how != "torch"  # the plain replay() path as export_check.py uses it
                self.g = torch.cuda.CUDAGraph(keep_graph=True) if keep else torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g, capture_error_mode="relaxed"):
                    for i in range(s.n):
                        call(i)
                if keep:
                    self.g.instantiate()
                    self.graph = VP(self.g.raw_cuda_graph())
                    self.exec = VP(self.g.raw_cuda_graph_exec())
            else:
                cap = torch.cuda.Stream()
                cap.wait_stream(s.st)
                with torch.cuda.stream(cap):
                    ok(cu.cuStreamBeginCapture_v2(VP(cap.cuda_stream), RELAXED), "begin capture")
                    for i in range(s.n):
                        call(i)
                    graph = VP()
                    ok(cu.cuStreamEndCapture(VP(cap.cuda_stream), ctypes.byref(graph)), "end capture")
                self.graph, self.exec = graph, VP()
                flags = AUTO_FREE if how == "drv-autofree" else 0
                ok(cu.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), graph, flags), "instantiate")
                ok(cu.cuGraphUpload(self.exec, VP(s.st.cuda_stream)), "upload")
            torch.cuda.synchronize()
        self.stream = VP(s.st.cuda_stream)

    def launch(self):
        if self.how == "torch":
            self.g.replay()
        else:
            ok(cu.cuGraphLaunch(self.exec, self.stream), "cuGraphLaunch")

    def close(self):
        self.torch.cuda.synchronize()
        if self.g is None:
            cu.cuGraphExecDestroy(self.exec)
            cu.cuGraphDestroy(self.graph)
        self.g = None


def time_variant(torch, ea, s, causal, how, repeats=20):
    g = Graph(torch, ea, s, causal, how)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once():
        s.refresh()
        s.flush()
        start.record(); g.launch(); end.record(); torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / s.n

    with torch.cuda.stream(s.st):
        spent = 0.0
        while spent < 25.0:
            spent += once() * s.n / 1e3
        per_call = [once() for _ in range(repeats)]
    nodes = node_types(g.graph) if g.graph is not None else (0, {"not kept": 0})
    g.close()
    return probe4.xc.median_min_max(per_call)[0], nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.export, "python"))
    import torch
    import evo_attention as ea

    drv = probe4.Driver()
    names = ["torch", "torch-drv", "drv", "drv-autofree"]
    res = {(c, n): [] for c in (False, True) for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for causal in (False, True):
            for name in order:
                s = probe4.Setup(torch, drv, {}, args.seed + 1000 * r)
                try:
                    us, nodes = time_variant(torch, ea, s, causal, name)
                except Exception as e:  # noqa: BLE001  (an API this torch lacks: say so, go on)
                    us, nodes = float("nan"), (0, {"error": str(e)[:200]})
                res[(causal, name)].append(us)
                s.close()
                if r == 0:
                    print(f"  graph {name} causal={causal}: {nodes[0]} nodes {nodes[1]}", flush=True)
            print(f"round {r} causal={causal!s:<5} " + "  ".join(
                f"{n} {res[(causal, n)][-1]:.3f}" for n in names), flush=True)
    print("\nP3 summary: µs per call, median [min, max] of the rounds' medians")
    for causal in (False, True):
        for name in names:
            med, lo, hi = probe4.xc.median_min_max(res[(causal, name)])
            print(f"{'causal' if causal else 'full':<7} {name:<13} {med:7.3f} [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
