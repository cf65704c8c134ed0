"""evo's attention champions for PyTorch.

    import sys; sys.path.insert(0, "OUT/python")
    import evo_attention
    o = evo_attention.sdpa(q, k, v, is_causal=True)
    o = evo_attention.sdpa(q, k8, v8, is_causal=True, enable_gqa=True)  # K/V [B, 8, L, D]

`sdpa` takes CUDA tensors [B, H, L, D] and runs the champion the export's dispatch table
picks for the shape. Under autograd (grad enabled and an input that requires grad) it is
differentiable with evo's kernels: the forward also writes the log-sum-exp of each row,
and the backward runs the export's backward kernel of the head dim and dtype on the
saved q, k, v, o and lse (grouped heads' dK and dV come out [B, Hkv, Lk, D] from the
kernel). For what the export does not cover (a head dim no champion was evolved for, or
under autograd no backward kernel covers, a dtype other than float16/bfloat16, CPU
tensors, a GPU the kernels were not built for, non-contiguous tensors) it calls
torch.nn.functional.scaled_dot_product_attention instead and says so once per reason
through `warnings`. `forward` is the strict forward-only call: the same checks raise
instead, and so do tensors that require grad.

torch is imported only when a function needs it, so `evo_attention.dispatch` (the rule)
works without it.
"""

import threading
import warnings

from . import _autograd, _lib
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


_DTYPE_LABELS = {"torch.float16": "f16", "torch.bfloat16": "bf16"}


def _describe(q, k, v, is_causal, enable_gqa):
    """The plain facts `_decide` needs about a call on torch tensors (no torch in them,
    so the decision is tested without torch)."""
    import torch

    tensors = (q, k, v)
    capability, device_name = None, None
    if all(t.is_cuda for t in tensors) and q.device == k.device == v.device:
        capability = tuple(torch.cuda.get_device_capability(q.device))
        device_name = torch.cuda.get_device_name(q.device)
    return {
        "devices": [str(t.device) for t in tensors],
        "cuda": all(t.is_cuda for t in tensors),
        "dtypes": [str(t.dtype) for t in tensors],
        "shapes": [tuple(t.shape) for t in tensors],
        "contiguous": all(t.is_contiguous() for t in tensors),
        "needs_grad": torch.is_grad_enabled() and any(t.requires_grad for t in tensors),
        "capability": capability,
        "device_name": device_name,
        "is_causal": bool(is_causal),
        "enable_gqa": bool(enable_gqa),
    }


def _decide(m, call, grad="auto"):
    """How a call described by `_describe` runs on manifest `m` (or a function returning
    it, called only when needed): ("forward", None, None)
    for the champion's forward, ("autograd", None, None) for the champion's forward with
    lse and the export's backward kernel, or ("fallback", kind, message) when the export
    does not cover it. `grad`: "auto" (differentiable when the call needs grad), "yes"
    (must be), "no" (forward only), or "refuse" (the strict call: needing grad is
    refused)."""
    devices, dtypes, shapes = call["devices"], call["dtypes"], call["shapes"]
    if not call["cuda"]:
        return "fallback", "device", f"tensors on {', '.join(devices)}: the champions run on CUDA"
    if len(set(devices)) != 1:
        return "fallback", "device", f"tensors on {', '.join(devices)}: one GPU only"
    dtype = _DTYPE_LABELS.get(dtypes[0])
    if len(set(dtypes)) != 1 or dtype is None:
        return "fallback", "dtype", (
            f"dtypes {', '.join(dtypes)}: the champions take float16 or bfloat16"
        )
    qs, ks, vs = (tuple(x) for x in shapes)
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
        return "fallback", "layout", f"shapes {qs}, {ks}, {vs}: expected [B, H, L, D]"
    b, h, lq, d = qs
    hkv = ks[1]
    grouped_ok = call["enable_gqa"] and hkv >= 1 and h % hkv == 0
    if ks[0] != b or (hkv != h and not grouped_ok) or ks[3] != d or vs != ks:
        return "fallback", "layout", (
            f"shapes {qs}, {ks}, {vs}: k and v must be [B, Hkv, Lk, D] with q's B and D, and "
            "Hkv = H (or, with enable_gqa=True, a divisor of H)"
        )
    if min(b, h, lq, ks[2]) < 1 or b * h > 65535:
        return "fallback", "shape", f"shape {qs}: B, H, L >= 1 and B*H <= 65535"
    if not call["contiguous"]:
        return "fallback", "layout", (
            "non-contiguous tensors: pass contiguous [B, H, L, D] (e.g. .contiguous())"
        )
    differentiable = grad == "yes" or (grad == "auto" and call["needs_grad"])
    # The manifest is read only for a call that got this far (a CPU call never needs it).
    m = m() if callable(m) else m
    if grad == "refuse" and call["needs_grad"]:
        return "fallback", "autograd", (
            "tensors that require grad: `forward` is forward-only; `sdpa` is differentiable"
        )
    capability = tuple(call["capability"] or ())
    if not m.runs_on(capability):
        return "fallback", "gpu", (
            f"{call['device_name']} (sm_{''.join(str(x) for x in capability)}): the export is "
            f"built for {m.data['arch']} ({m.device})"
        )
    champion = m.choose(b, h, lq, ks[2], d, call["is_causal"], hkv)
    if champion is None:
        return "fallback", "head_dim", f"head dim {d}: the export has champions for {m.head_dims}"
    if not differentiable:
        return "forward", None, None
    # The lse comes from the champion's lse twin; exports written before them have none.
    if not champion.get("lse_kernels"):
        return "fallback", "backward", (
            f"the gradient: champion {champion['class']} has no lse twin (the export was "
            "written before them); export the champions again"
        )
    if m.backward_for(d, dtype) is None:
        return "fallback", "backward", (
            f"the gradient at head dim {d} in {dtype}: the export's backward kernels cover "
            f"{m.backward_coverage()}"
        )
    return "autograd", None, None


def _uncovered(q, k, v, is_causal, enable_gqa=False, grad="auto"):
    """(mode, kind, message) of `_decide` for torch tensors."""
    import torch

    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return "fallback", "type", "q, k and v must be torch tensors"
    return _decide(manifest, _describe(q, k, v, is_causal, enable_gqa), grad)


def covers(q, k, v, is_causal=False, enable_gqa=False, requires_grad=None):
    """True when `sdpa` would run evo's kernels on these tensors. `requires_grad`: None
    asks about the call as made (differentiable when grad is enabled and an input
    requires it), True whether the gradient is covered too (a backward kernel for the
    head dim and dtype), False about the forward alone."""
    grad = {None: "auto", True: "yes", False: "no"}[requires_grad]
    return _uncovered(q, k, v, is_causal, enable_gqa, grad)[0] != "fallback"


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

    mode, kind, message = _uncovered(q, k, v, is_causal, enable_gqa, grad="refuse")
    if mode == "fallback":
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

    def fallback_fn(q, k, v):
        if enable_gqa:
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=is_causal, enable_gqa=True
            )
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    def fallback():
        return fallback_fn(q, k, v)

    mode, kind, message = _uncovered(q, k, v, is_causal, enable_gqa)
    lib = None
    if mode != "fallback":
        try:
            lib = _library()
        except RuntimeError as e:
            mode, kind, message = "fallback", "library", str(e)
    if mode == "autograd" and not lib.has_backward:
        mode, kind, message = "fallback", "library", (
            f"the gradient: the runtime library {lib.path} has no evo_attention_backward; "
            "export again with a current build"
        )
    if mode == "fallback":
        _warn_once(kind, message)
        return fallback()
    if mode == "autograd":
        try:
            return _autograd.attention(torch, lib, q, k, v, is_causal, fallback_of=fallback_fn)
        except _autograd.Unsupported as e:
            _warn_once("runtime", str(e))
            return fallback()
    out = torch.empty_like(q)
    status = _launch(torch, lib, q, k, v, out, is_causal)
    if status == _lib.UNSUPPORTED:
        _warn_once("runtime", lib.last_error())
        return fallback()
    if status != _lib.OK:
        raise RuntimeError(f"evo_attention: {lib.last_error()}")
    return out
