#!/usr/bin/env python3
"""Run R5's probe: in runs R3 and R4 scripts/export_check.py timed the exported L8192
champion ~8% slower (held events) than probe.py did on the same export in the same run.
This replays export_check.py's steps for that class one at a time and times the
champion (held events, as export_check.py) after each: alone; after the graph timing of
the champion; after cuDNN's graph timing; after the five small champions ran as
export_check.py runs them first.

Usage: python3 probe2.py EXPORT_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import export_check as xc  # noqa: E402


def main():
    export = sys.argv[1]
    sys.path.insert(0, os.path.join(export, "python"))
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import evo_attention

    def setup(b, h, l, d, causal=False):
        gen = torch.Generator(device="cuda").manual_seed(2026)
        sets = []
        for _ in range(xc.input_sets(b, h, l, l, d)):
            q, k, v = (torch.randn(b, h, l, d, device="cuda", generator=gen).to(torch.float16)
                       for _ in range(3))
            sets.append((q, k, v, torch.empty_like(q)))
        return gen, sets

    def held(gen, sets, causal=False):
        q, k, v, o = sets[0]

        def refresh():
            for t in (q, k, v):
                t.normal_(generator=gen)
        return xc.time_events(torch, lambda: evo_attention.forward(q, k, v, o, is_causal=causal), refresh)[0]

    def graph(sets, causal=False):
        return xc.time_graph(torch, lambda i: evo_attention.forward(
            *sets[i % len(sets)][:3], sets[i % len(sets)][3], is_causal=causal))[0]

    def cudnn_graph(sets, causal=False):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return xc.time_graph(torch, lambda i: F.scaled_dot_product_attention(
                *sets[i % len(sets)][:3], is_causal=causal))[0]

    big = (1, 16, 8192, 128)
    gen, sets = setup(*big)
    print(f"alone                          {held(gen, sets):8.2f}", flush=True)
    print(f"again                          {held(gen, sets):8.2f}", flush=True)
    g = graph(sets)
    print(f"after its graph timing ({g:.1f}) {held(gen, sets):8.2f}", flush=True)
    c = cudnn_graph(sets)
    print(f"after cuDNN's graph ({c:.1f})    {held(gen, sets):8.2f}", flush=True)
    print(f"again                          {held(gen, sets):8.2f}", flush=True)
    del sets
    torch.cuda.empty_cache()
    for (b, h, l, d, causal) in [(1, 8, 512, 64, False), (1, 8, 512, 64, True), (4, 16, 1024, 64, True),
                                 (4, 16, 1024, 64, False), (2, 16, 4096, 128, True), (2, 16, 4096, 128, False)]:
        g2, s2 = setup(b, h, l, d)
        graph(s2, causal); cudnn_graph(s2, causal)
        del s2
        torch.cuda.empty_cache()
    gen, sets = setup(*big)
    print(f"after the six other classes    {held(gen, sets):8.2f}", flush=True)
    print(f"again                          {held(gen, sets):8.2f}", flush=True)
    g = graph(sets)
    c = cudnn_graph(sets)
    print(f"after graph {g:.1f}, cuDNN {c:.1f}  {held(gen, sets):8.2f}", flush=True)


if __name__ == "__main__":
    main()
