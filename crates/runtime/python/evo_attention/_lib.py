"""The export's runtime library (lib/libevo_runtime.so, include/evo.h) through ctypes."""

import ctypes
import os

DTYPE_F16 = 0
DTYPE_BF16 = 1
OK = 0
UNSUPPORTED = 2


class Library:
    """The C ABI of include/evo.h, initialised with one export folder."""

    def __init__(self, path, export_dir):
        if not path or not os.path.isfile(path):
            raise FileNotFoundError(
                f"the evo runtime library is not in this export ({path or 'none recorded'}); "
                "build it (`cargo build --release -p evo-runtime`) and export again with "
                "`evo export OUT --champions DIR --lib target/release/libevo_runtime.so`, "
                "or point EVO_RUNTIME_LIB at it"
            )
        lib = ctypes.CDLL(path)
        lib.evo_init.argtypes = [ctypes.c_char_p]
        lib.evo_init.restype = ctypes.c_int
        lib.evo_attention_forward.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 7 + [
            ctypes.c_void_p
        ]
        lib.evo_attention_forward.restype = ctypes.c_int
        lib.evo_attention_forward_ex.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 11 + [
            ctypes.c_void_p
        ]
        lib.evo_attention_forward_ex.restype = ctypes.c_int
        # Older runtime libraries lack the gradient calls: the module then falls back
        # to torch under autograd, saying so.
        self.has_backward = hasattr(lib, "evo_attention_forward_lse") and hasattr(
            lib, "evo_attention_backward"
        )
        if self.has_backward:
            lib.evo_attention_forward_lse.argtypes = [ctypes.c_void_p] * 5 + [
                ctypes.c_int
            ] * 11 + [ctypes.c_void_p]
            lib.evo_attention_forward_lse.restype = ctypes.c_int
            lib.evo_attention_backward.argtypes = [ctypes.c_void_p] * 9 + [ctypes.c_int] * 11 + [
                ctypes.c_void_p
            ]
            lib.evo_attention_backward.restype = ctypes.c_int
        lib.evo_last_error.argtypes = []
        lib.evo_last_error.restype = ctypes.c_char_p
        lib.evo_version.argtypes = []
        lib.evo_version.restype = ctypes.c_char_p
        self.lib = lib
        self.path = path
        if lib.evo_init(os.fsencode(export_dir)) != OK:
            raise RuntimeError(f"evo_init({export_dir}): {self.last_error()}")

    def last_error(self):
        return self.lib.evo_last_error().decode("utf-8", "replace")

    def version(self):
        return self.lib.evo_version().decode()

    def forward(self, q, k, v, o, dims, dtype, causal, stream):
        """Enqueues one call on raw device pointers; returns the status code."""
        b, h, lq, lk, d = dims
        return self.lib.evo_attention_forward(
            q, k, v, o, b, h, lq, lk, d, dtype, int(bool(causal)), stream
        )

    def forward_ex(self, q, k, v, o, dims, kv_heads, dtype, causal, stream):
        """evo_attention_forward_ex with K/V heads (top-left diagonal, no window, as
        torch's `is_causal` and `enable_gqa`); returns the status code."""
        b, h, lq, lk, d = dims
        return self.lib.evo_attention_forward_ex(
            q, k, v, o, b, h, kv_heads, lq, lk, d, dtype, int(bool(causal)), 0, -1, -1, stream
        )

    def forward_lse(self, q, k, v, o, lse, dims, kv_heads, dtype, causal, stream):
        """evo_attention_forward_ex that also writes the fp32 [B, H, Lq] log-sum-exp to
        `lse` (top-left diagonal, no window); returns the status code."""
        b, h, lq, lk, d = dims
        return self.lib.evo_attention_forward_lse(
            q, k, v, o, lse, b, h, kv_heads, lq, lk, d, dtype, int(bool(causal)), 0, -1, -1,
            stream,
        )

    def backward(self, q, k, v, o, do, lse, dq, dk, dv, dims, kv_heads, dtype, causal, stream):
        """evo_attention_backward (top-left diagonal, no window): dq [B, H, Lq, D], dk and
        dv [B, Hkv, Lk, D]; returns the status code."""
        b, h, lq, lk, d = dims
        return self.lib.evo_attention_backward(
            q, k, v, o, do, lse, dq, dk, dv, b, h, kv_heads, lq, lk, d, dtype,
            int(bool(causal)), 0, -1, -1, stream,
        )


def library_path(manifest):
    """EVO_RUNTIME_LIB if set, else the library the manifest records."""
    return os.environ.get("EVO_RUNTIME_LIB") or manifest.library
