#!/usr/bin/env python3
"""Run P2's Python side (see run-p2.sh): the exported seed-row champions through
evo_attention in the PyTorch process.

  python3 probe5.py EXPORT time [--rounds 5]   probe4.py's "base" graph figure per row
  python3 probe5.py EXPORT loop                 60 eager calls per row over 50 input sets
                                                (for ncu, which times each kernel alone)
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import probe4  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("what", choices=("time", "loop"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.export, "python"))
    import torch
    import evo_attention as ea

    drv = probe4.Driver()
    for causal in (False, True):
        if args.what == "loop":
            s = probe4.Setup(torch, drv, {}, args.seed)
            for i in range(60):
                q, k, v, o = s.sets[i % s.n]
                ea.forward(q, k, v, o, is_causal=causal)
            torch.cuda.synchronize()
            s.close()
            print(f"causal={causal}: 60 calls", flush=True)
            continue
        per_round = []
        for r in range(args.rounds):
            s = probe4.Setup(torch, drv, {}, args.seed + 1000 * r)
            per_round.append(probe4.time_graph(torch, ea, s, causal)[0])
            s.close()
            print(f"round {r} causal={causal} base {per_round[-1]:.3f}", flush=True)
        med, lo, hi = probe4.xc.median_min_max(per_round)
        print(f"P2 torch summary causal={int(causal)}: base {med:.3f} [{lo:.3f}, {hi:.3f}] "
              f"(median of {args.rounds} rounds' medians, µs per call)", flush=True)


if __name__ == "__main__":
    main()
