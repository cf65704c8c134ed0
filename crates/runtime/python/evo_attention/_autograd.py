"""`sdpa` under autograd: a torch.autograd.Function whose forward is the champion with
the log-sum-exp (evo_attention_forward_lse) and whose backward is the export's backward
kernel (evo_attention_backward) on the saved q, k, v, o and lse.

Defined on first use, so that importing evo_attention does not import torch.
"""

from . import _lib

_function = {}


class Unsupported(RuntimeError):
    """The runtime has no kernel for the call (EVO_ERROR_UNSUPPORTED): fall back."""


def _dtype_code(torch, dtype):
    return {torch.float16: _lib.DTYPE_F16, torch.bfloat16: _lib.DTYPE_BF16}[dtype]


def _stream(torch, t):
    return torch.cuda.current_stream(t.device).cuda_stream


def _attention_function(torch):
    if "Attention" in _function:
        return _function["Attention"]

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, is_causal, lib, fallback_of):
            b, h, lq, d = q.shape
            hkv, lk = k.shape[1], k.shape[2]
            out = torch.empty_like(q)
            lse = torch.empty((b, h, lq), device=q.device, dtype=torch.float32)
            status = lib.forward_lse(
                q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
                (b, h, lq, lk, d), hkv, _dtype_code(torch, q.dtype), is_causal,
                _stream(torch, q),
            )
            if status == _lib.UNSUPPORTED:
                raise Unsupported(lib.last_error())
            if status != _lib.OK:
                raise RuntimeError(f"evo_attention: {lib.last_error()}")
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.is_causal = is_causal
            ctx.lib = lib
            ctx.fallback_of = fallback_of
            return out

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            lib = ctx.lib
            do = do.to(q.dtype).contiguous()
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            b, h, lq, d = q.shape
            hkv, lk = k.shape[1], k.shape[2]
            status = lib.backward(
                q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), do.data_ptr(),
                lse.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                (b, h, lq, lk, d), hkv, _dtype_code(torch, q.dtype), ctx.is_causal,
                _stream(torch, q),
            )
            if status == _lib.UNSUPPORTED:
                # The manifest said a backward covers this call, the runtime disagrees
                # (an older library): the gradient by torch, recomputing the forward.
                from . import _warn_once

                _warn_once("runtime-backward", lib.last_error())
                with torch.enable_grad():
                    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                    out = ctx.fallback_of(*leaves)
                    dq, dk, dv = torch.autograd.grad(out, leaves, do)
            elif status != _lib.OK:
                raise RuntimeError(f"evo_attention: {lib.last_error()}")
            need = ctx.needs_input_grad
            return (
                dq if need[0] else None,
                dk if need[1] else None,
                dv if need[2] else None,
                None,
                None,
                None,
            )

    _function["Attention"] = Attention
    return Attention


def attention(torch, lib, q, k, v, is_causal, fallback_of):
    """The differentiable champion call: O, with the backward recorded for autograd.
    Raises Unsupported when the forward champion cannot write the lse."""
    return _attention_function(torch).apply(q, k, v, bool(is_causal), lib, fallback_of)
