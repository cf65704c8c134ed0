#!/usr/bin/env python3
"""Run P6's in-process probe: probe5.c (as a library) several times in one Python process
(no PyTorch), with host sleeps between some runs: does a later run's slowdown (P4, P5)
go away after the GPU idles? PLAN is a comma list: a number runs probe5 with that many
extra evo_init calls (0 = plain), `sN` sleeps N seconds.

Usage: python3 probe9.py EXPORT LIBPROBE5 PLAN [--rounds 3]
"""
import argparse
import ctypes
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("lib")
    ap.add_argument("plan")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    lib.probe5_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    t0 = time.time()
    for n, step in enumerate(args.plan.split(",")):
        if step.startswith("s"):
            time.sleep(float(step[1:]))
            print(f"slept {step[1:]} s", flush=True)
            continue
        a = [b"probe5", args.export.encode(), b"0", str(args.rounds).encode(), b"0", b"0", b"0",
             step.encode(), b"0"]
        print(f"t={time.time() - t0:5.1f} s step {n} reinit={step}:", flush=True)
        lib.probe5_main(len(a), (ctypes.c_char_p * len(a))(*a))


if __name__ == "__main__":
    main()
