#!/usr/bin/env python3
"""Run D10: why SDPA cuDNN's warm (graph-replay) figure on the grouped decode row moves
between runs (175 to 211 µs) while its cold figure stays at 176-178. The harness's own
timing (scripts/sdpa_baseline.py's time_graph and time_cold, imported, same input sets)
repeated five times per backend, then the per-replay times of one graph, each printed,
to see whether the slow figures are whole slow replays or slow calls inside them."""
import sys
import statistics
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, "scripts")
import sdpa_baseline as sb  # noqa: E402

torch.manual_seed(0)
q = torch.randn(16, 32, 1, 128, device="cuda", dtype=torch.float16)
k = torch.randn(16, 8, 8192, 128, device="cuda", dtype=torch.float16)
v = torch.randn(16, 8, 8192, 128, device="cuda", dtype=torch.float16)
sets = [(q, k, v)] + [(q.clone(), k.clone(), v.clone()) for _ in range(2)]
for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
    with sdpa_kernel([backend]):
        fn = lambda i: F.scaled_dot_product_attention(*sets[i % len(sets)], enable_gqa=True)
        for rep in range(5):
            med, lo, hi, method = sb.time_graph(fn)
            cmed, clo, chi = sb.time_cold(fn)
            print(f"{name} rep {rep}: warm {med:.1f} [{lo:.1f}, {hi:.1f}] ({method}); cold {cmed:.1f} [{clo:.1f}, {chi:.1f}]", flush=True)
        # one graph of 6 calls, 30 replays, each timed
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):
                fn(i)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            for i in range(6):
                fn(i)
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        per = []
        for _ in range(30):
            st.record(); g.replay(); en.record(); torch.cuda.synchronize()
            per.append(st.elapsed_time(en) * 1e3 / 6)
        print(f"{name} graph of 6, per call by replay: " + " ".join(f"{x:.0f}" for x in per))
        print(f"{name} median {statistics.median(per):.1f}")
