#!/usr/bin/env python3
"""Run P8's Python side: P7 found the seed-row figure depends on the stream (the first
stream a process makes is fast, any made later 4-5% slower). This times the exported
champion through the Python module (probe4.py's base method) on the legacy default stream
and then on each of the next STREAMS streams `torch.cuda.Stream()` hands out.

Usage: python3 probe11.py EXPORT [--streams 12]
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
    ap.add_argument("--streams", type=int, default=12)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.export, "python"))
    import torch
    import evo_attention as ea

    drv = probe4.Driver()
    out = []
    for j in range(args.streams + 1):
        s = probe4.Setup(torch, drv, {"stream": j > 0}, 2026 + j)
        us = probe4.time_graph(torch, ea, s, False)[0]
        out.append(f"{'legacy' if j == 0 else hex(s.st.cuda_stream)}: {us:.3f}")
        s.close()
    print("P8 torch streams (µs per call): " + "  ".join(out), flush=True)


if __name__ == "__main__":
    main()
