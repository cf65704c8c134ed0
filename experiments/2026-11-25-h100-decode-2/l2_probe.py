"""Run D4's probe: what a write pass over L2 before a timed call costs the call, outside
evo. Single calls between two events (behind a ~1 ms GPU spin, as scripts/sdpa_baseline.py
times them), after one of: nothing (the previous call of the same kind ran just before),
a write pass (`zero_()` of a buffer twice the L2's size: what FAST and the SDPA script did
before), or a read pass (`max()` of such a buffer: what they do now). Kernels: PyTorch SDPA
on the two decode rows of the models suite (grouped B16 H32/8 and multi-query B16 H32/1,
Lq 1, Lk 8192, D128, f16) and a plain read of the grouped row's K and V (`max()`, 537 MB).
Prints one row per kernel x preparation: median, min, max µs of 20 calls."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)
dev = "cuda"
l2 = torch.cuda.get_device_properties(0).L2_cache_size
wbuf = torch.zeros(2 * l2, dtype=torch.uint8, device=dev)
rbuf = torch.zeros(2 * l2 // 4, dtype=torch.int32, device=dev)
preps = {"none": lambda: None, "write": lambda: wbuf.zero_(), "read": lambda: rbuf.max()}


def decode(kv_heads):
    q = torch.randn(16, 32, 1, 128, dtype=torch.float16, device=dev)
    k = torch.randn(16, kv_heads, 8192, 128, dtype=torch.float16, device=dev)
    v = torch.randn(16, kv_heads, 8192, 128, dtype=torch.float16, device=dev)
    return q, k, v


def sdpa(backend, q, k, v):
    def fn():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    return fn


kernels = {}
for name, kvh in (("grouped", 8), ("mqa", 1)):
    q, k, v = decode(kvh)
    for bname, b in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        fn = sdpa(b, q, k, v)
        try:
            fn()
            torch.cuda.synchronize()
            kernels[f"sdpa-{bname} {name} decode"] = fn
        except Exception as e:  # a backend that refuses the shape
            print(f"sdpa-{bname} {name}: {type(e).__name__}: {str(e)[:100]}")
    if kvh == 8:
        kernels["read K and V (max) grouped"] = (lambda k=k, v=v: (k.max(), v.max()))

start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
print(f"{'kernel':34} {'before':6} {'median':>8} {'min':>8} {'max':>8}  (µs, 20 single calls)")
for rnd in range(2):
    for kname, fn in kernels.items():
        for pname, prep in preps.items():
            for _ in range(3):
                fn()
            times = []
            for _ in range(20):
                prep()
                torch.cuda._sleep(2_000_000)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e3)
            times.sort()
            med = (times[9] + times[10]) / 2
            print(f"{kname:34} {pname:6} {med:8.2f} {times[0]:8.2f} {times[-1]:8.2f}  round {rnd + 1}")
