"""evo's attention champions for PyTorch.

    import sys; sys.path.insert(0, "OUT/python")
    import evo_attention
    o = evo_attention.sdpa(q, k, v, is_causal=True)
    o = evo_attention.sdpa(q, k8, v8, is_causal=True, enable_gqa=True)  # K/V [B, 8, L, D]

`sdpa` takes CUDA tensors [B, H, L, D] and runs the champion the export's dispatch table
picks for the shape; for what the export does not cover (a head dim no champion was
evolved for, a dtype other than float16/bfloat16, CPU tensors, a GPU the kernels were not
built for, non-contiguous tensors, autograd) it calls
torch.nn.functional.scaled_dot_product_attention instead and says so once per reason
through `warnings`. `forward` is the strict call: the same checks raise instead.

torch is imported only when a function needs it, so `evo_attention.dispatch` (the rule)
works without it.
"""

import threading
import warnings

from . import _lib
from .dispatch import Manifest, arch_runs_on  # noqa: F401  (the public rule)

__all__ = ["sdpa", "forward", "covers", "manifest", "Manifest", "arch_runs_on"]

_state = {"manifest": None, "library": None, "library_error": None}
_lock = threading.Lock()
_warned = set()


def manifest():
    """The export's manifest (read once)."""
    with _lock:
        if _state["manifest"] is None:
            _state["manifest"] = Manifest()
        return _state["manifest"]


def _library():
    with _lock:
        if _state["library"] is None and _state["library_error"] is None:
            m = _state["manifest"] or Manifest()
            _state["manifest"] = m
            try:
                _state["library"] = _lib.Library(_lib.library_path(m), m.export_dir)
            except (OSError, RuntimeError) as e:
                _state["library_error"] = str(e)
        if _state["library"] is None:
            raise RuntimeError(_state["library_error"])
        return _state["library"]


def _dtype_code(torch, dtype):
    return {torch.float16: _lib.DTYPE_F16, torch.bfloat16: _lib.DTYPE_BF16}.get(dtype)


def _uncovered(q, k, v, is_causal, enable_gqa=False):
    """(kind, message) when the export cannot run this call, else None."""
    import torch

    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return "type", "q, k and v must be torch tensors"
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return "device", f"tensors on {q.device}, {k.device}, {v.device}: the champions run on CUDA"
    if not (q.device == k.device == v.device):
        return "device", f"tensors on {q.device}, {k.device}, {v.device}: one GPU only"
    if not (q.dtype == k.dtype == v.dtype) or _dtype_code(torch, q.dtype) is None:
        return "dtype", f"dtypes {q.dtype}, {k.dtype}, {v.dtype}: the champions take float16 or bfloat16"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "layout", f"shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}: expected [B, H, L, D]"
    b, h, lq, d = q.shape
    hkv = k.shape[1]
    grouped_ok = enable_gqa and hkv >= 1 and h % hkv == 0
    if (
        k.shape[0] != b
        or (hkv != h and not grouped_ok)
        or k.shape[3] != d
        or tuple(v.shape) != tuple(k.shape)
    ):
        return "layout", (
            f"shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}: k and v must be "
            "[B, Hkv, Lk, D] with q's B and D, and Hkv = H (or, with enable_gqa=True, a "
            "divisor of H)"
        )
    if min(b, h, lq, k.shape[2]) < 1 or b * h > 65535:
        return "shape", f"shape {tuple(q.shape)}: B, H, L >= 1 and B*H <= 65535"
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        return "layout", "non-contiguous tensors: pass contiguous [B, H, L, D] (e.g. .contiguous())"
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return "autograd", "tensors that require grad: the champions are forward-only"
    m = manifest()
    capability = torch.cuda.get_device_capability(q.device)
    if not m.runs_on(capability):
        return "gpu", (
            f"{torch.cuda.get_device_name(q.device)} (sm_{capability[0]}{capability[1]}): the "
            f"export is built for {m.data['arch']} ({m.device})"
        )
    if m.choose(b, h, lq, k.shape[2], d, is_causal, hkv) is None:
        return "head_dim", f"head dim {d}: the export has champions for {m.head_dims}"
    return None


def covers(q, k, v, is_causal=False, enable_gqa=False):
    """True when `sdpa` would run a champion on these tensors."""
    return _uncovered(q, k, v, is_causal, enable_gqa) is None


def _warn_once(kind, message):
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(
            f"evo_attention: falling back to torch SDPA for {message} "
            "(said once per reason)",
            RuntimeWarning,
            stacklevel=3,
        )


def _launch(torch, lib, q, k, v, out, is_causal):
    """Enqueues the champion on the current stream of q's GPU (the runtime finds the GPU
    from the pointers and makes its context current); returns the status code."""
    b, h, lq, d = q.shape
    stream = torch.cuda.current_stream(q.device).cuda_stream
    dims = (b, h, lq, k.shape[2], d)
    if k.shape[1] != h:
        return lib.forward_ex(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
            dims, k.shape[1], _dtype_code(torch, q.dtype), is_causal, stream,
        )
    return lib.forward(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
        dims, _dtype_code(torch, q.dtype), is_causal, stream,
    )


def forward(q, k, v, out, is_causal=False, enable_gqa=False):
    """out = softmax(q kᵀ / sqrt(D) + mask) v with the champion for the shape, enqueued
    on the current stream. Raises TypeError / ValueError for what the export does not
    cover, RuntimeError with the runtime's message for what fails."""
    import torch

    why = _uncovered(q, k, v, is_causal, enable_gqa)
    if why is not None:
        kind, message = why
        raise (TypeError if kind in ("type", "dtype") else ValueError)(f"evo_attention: {message}")
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device or not out.is_contiguous():
        raise ValueError(
            f"evo_attention: out must be a contiguous {q.dtype} tensor of q's shape "
            f"{tuple(q.shape)} on {q.device}"
        )
    lib = _library()
    status = _launch(torch, lib, q, k, v, out, is_causal)
    if status != _lib.OK:
        raise RuntimeError(f"evo_attention: {lib.last_error()}")
    return out


def sdpa(q, k, v, is_causal=False, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal,
    enable_gqa=enable_gqa) with the champion for the shape where the export covers it
    (see the module's doc)."""
    import torch

    def fallback():
        if enable_gqa:
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=is_causal, enable_gqa=True
            )
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    why = _uncovered(q, k, v, is_causal, enable_gqa)
    if why is None:
        try:
            lib = _library()
        except RuntimeError as e:
            why = ("library", str(e))
    if why is not None:
        _warn_once(*why)
        return fallback()
    out = torch.empty_like(q)
    status = _launch(torch, lib, q, k, v, out, is_causal)
    if status == _lib.UNSUPPORTED:
        _warn_once("runtime", lib.last_error())
        return fallback()
    if status != _lib.OK:
        raise RuntimeError(f"evo_attention: {lib.last_error()}")
    return out
