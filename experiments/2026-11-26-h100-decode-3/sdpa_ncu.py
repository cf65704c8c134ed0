#!/usr/bin/env python3
"""The grouped decode row's SDPA calls (B16 H32/8 Lq1 Lk8192 D128 f16; bottom-right causal
at Lq 1 masks no key, so no mask), four calls per backend, for Nsight Compute to profile:
what grid, block, registers and shared memory cuDNN's and flash's kernels use (run D6)."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)
q = torch.randn(16, 32, 1, 128, device="cuda", dtype=torch.float16)
k = torch.randn(16, 8, 8192, 128, device="cuda", dtype=torch.float16)
v = torch.randn(16, 8, 8192, 128, device="cuda", dtype=torch.float16)
for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
    with sdpa_kernel([backend]):
        for _ in range(4):
            torch.cuda.nvtx.range_push(name)
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(name, "ok")
