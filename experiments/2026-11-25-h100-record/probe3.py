#!/usr/bin/env python3
"""Run R9's probe: run R8 timed the exported seed champion 8-10% above `evo bench` by
FAST's own graph method. This times it (and the causal one) by that method with the input
sets laid out and redrawn four ways: separate tensors redrawn one by one (R8's
export_check.py), slices of one buffer per tensor redrawn with one launch each (the
present export_check.py, as FAST's slots), and both without any redraw.

Usage: python3 probe3.py EXPORT_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import export_check as xc  # noqa: E402


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "python"))
    import torch
    import evo_attention

    b, h, l, d = 1, 8, 512, 64
    n = xc.input_sets(b, h, l, l, d)
    for causal in (False, True):
        gen = torch.Generator(device="cuda").manual_seed(2026)
        scattered = [tuple(torch.randn(b, h, l, d, device="cuda", generator=gen).half()
                           for _ in range(3)) + (torch.empty(b, h, l, d, device="cuda", dtype=torch.half),)
                     for _ in range(n)]
        bufs = [torch.randn(n, b, h, l, d, device="cuda", generator=gen).half() for _ in range(3)]
        bufs.append(torch.empty_like(bufs[0]))
        sliced = [tuple(t[i] for t in bufs) for i in range(n)]

        def one_by_one():
            for st in scattered:
                for t in st[:3]:
                    t.normal_(generator=gen)

        def per_buffer():
            for t in bufs[:3]:
                t.normal_(generator=gen)

        for label, sets, refresh in [
            ("separate tensors, redrawn one by one", scattered, one_by_one),
            ("slices of one buffer, one draw per tensor", sliced, per_buffer),
            ("separate tensors, no redraw", scattered, lambda: None),
            ("slices of one buffer, no redraw", sliced, lambda: None),
        ]:
            med, lo, hi = xc.time_sets_graph(torch, lambda i: evo_attention.forward(
                *sets[i][:3], sets[i][3], is_causal=causal), n, refresh)
            print(f"causal={causal!s:<5} {label:<44} {med:7.2f} µs [{lo:.2f}, {hi:.2f}]", flush=True)


if __name__ == "__main__":
    main()
