#!/usr/bin/env python3
"""Run P4's probe: is it the PyTorch process? probe5.c, built as a library, runs the
exported seed-row champion through the C ABI (graph plain / re-pointed / same, FAST's
method) from this Python process at three points:

  A  before PyTorch is imported
  B  after `import torch` and CUDA's initialisation through it
  C  after the Python module timed the same champion (probe4.py's base figure, printed)

each with the inputs as drawn once (refresh 0) and written again before every replay
(refresh 1). Usage: python3 probe7.py EXPORT LIBPROBE5 [--rounds 5]
"""
import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("lib")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    lib.probe5_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def c_probe(stage):
        for causal in (0, 1):
            for refresh in (0, 1):
                a = [b"probe5", args.export.encode(), str(causal).encode(), str(args.rounds).encode(),
                     b"0", str(refresh).encode()]
                print(f"stage {stage} causal={causal} refresh={refresh}:", flush=True)
                rc = lib.probe5_main(len(a), (ctypes.c_char_p * len(a))(*a))
                if rc:
                    print(f"  probe5_main returned {rc}", flush=True)

    c_probe("A (no torch)")
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print(f"torch {torch.__version__} imported; CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING')}",
          flush=True)
    c_probe("B (torch imported)")
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(args.export, "python"))
    import evo_attention as ea
    import probe4
    drv = probe4.Driver()
    for causal in (False, True):
        per_round = []
        for r in range(args.rounds):
            s = probe4.Setup(torch, drv, {}, 2026 + 1000 * r)
            per_round.append(probe4.time_graph(torch, ea, s, causal)[0])
            s.close()
        med, lo, hi = probe4.xc.median_min_max(per_round)
        print(f"P4 torch module causal={int(causal)}: base {med:.3f} [{lo:.3f}, {hi:.3f}]", flush=True)
    c_probe("C (after the module)")


if __name__ == "__main__":
    main()
