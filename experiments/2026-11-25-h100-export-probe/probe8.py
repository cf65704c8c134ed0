#!/usr/bin/env python3
"""Run P5's in-process probe: P4 found the same C code (probe5.c) 5% slower on its second
and later runs in one process than on its first, before PyTorch was imported. This runs
probe5.c (as a library) over the allocation layouts of its header, in this order, in one
Python process: before PyTorch 0, 0, 3, 3, 4, 0; then after `import torch` 0, 3, 3, 0;
both rows each time, inputs drawn once (refresh 0).

Usage: python3 probe8.py EXPORT LIBPROBE5 [--rounds 3]
"""
import argparse
import ctypes
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("lib")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    lib.probe5_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def run(stage, layouts):
        for n, layout in enumerate(layouts):
            for causal in (0, 1):
                a = [b"probe5", args.export.encode(), str(causal).encode(), str(args.rounds).encode(),
                     b"0", b"0", str(layout).encode()]
                print(f"stage {stage} run {n} layout={layout} causal={causal}:", flush=True)
                lib.probe5_main(len(a), (ctypes.c_char_p * len(a))(*a))

    run("A (no torch)", [0, 0, 3, 3, 4, 0])
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    run("B (torch imported)", [0, 3, 3, 0])


if __name__ == "__main__":
    main()
