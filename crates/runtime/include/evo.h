/* evo.h: run evo's exported attention champions from C or C++.
 *
 * Link with the export's lib/libevo_runtime.so (`-L OUT/lib -levo_runtime`). The tensors
 * are the caller's: contiguous [B, H, L, D] device buffers of one GPU, in the dtype
 * given; the call is enqueued on the caller's stream and returns without waiting.
 * Every function returns EVO_OK or an error code; evo_last_error() then says what went
 * wrong and how to fix it (per thread, valid until the thread's next call).
 */
#ifndef EVO_H
#define EVO_H

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of Q, K, V and O. */
#define EVO_DTYPE_F16 0
#define EVO_DTYPE_BF16 1

/* Status codes. */
#define EVO_OK 0
#define EVO_ERROR_INVALID_ARGUMENT 1 /* null/host/too-small pointer, bad dtype code, zero length */
#define EVO_ERROR_UNSUPPORTED 2      /* no champion (or backward) for this head dim or dtype: fall back */
#define EVO_ERROR_NO_DEVICE 3        /* no NVIDIA driver or GPU */
#define EVO_ERROR_EXPORT 4           /* the export folder is missing or malformed */
#define EVO_ERROR_KERNEL 5           /* a kernel breaks the ABI or was built for another GPU */
#define EVO_ERROR_CUDA 6             /* a CUDA driver call failed */
#define EVO_ERROR_INTERNAL 7         /* a bug in the runtime (a caught panic) */

/* Reads the export folder (the one holding manifest.json). Without this call the first
 * evo_attention_forward reads the folder named by the EVO_EXPORT_DIR environment
 * variable. Calling it again replaces the export. */
int evo_init(const char* export_dir);

/* O = softmax(Q K^T / sqrt(D) + mask) V, with q [B, H, Lq, D], k and v [B, H, Lk, D],
 * o [B, H, Lq, D]; causal != 0 masks top-left aligned (query i sees keys j <= i, as
 * PyTorch's is_causal). dtype is EVO_DTYPE_F16 or EVO_DTYPE_BF16. stream is a CUstream
 * (or cudaStream_t) of the tensors' GPU, NULL for the legacy default stream. */
int evo_attention_forward(const void* q, const void* k, const void* v, void* o,
                          int B, int H, int Lq, int Lk, int D, int dtype, int causal,
                          void* stream);

/* Where the mask's diagonal sits when Lq != Lk. */
#define EVO_ALIGN_TOP_LEFT 0     /* query i's diagonal is key i (PyTorch's is_causal) */
#define EVO_ALIGN_BOTTOM_RIGHT 1 /* key i + Lk - Lq (FlashAttention, KV caches) */

/* evo_attention_forward for the problems it cannot state: k and v [B, Hkv, Lk, D] with Hkv
 * dividing H (grouped-query attention; 1 is multi-query), query head h reading K/V head
 * h / (H / Hkv); the causal mask and a window at the diagonal `align` places: query i
 * with diagonal key d sees keys j with j <= d (causal != 0), j >= d - window_left and
 * j <= d + window_right (-1: that side unbounded). A row that sees no key is zeros. */
int evo_attention_forward_ex(const void* q, const void* k, const void* v, void* o,
                             int B, int H, int Hkv, int Lq, int Lk, int D, int dtype, int causal,
                             int align, int window_left, int window_right, void* stream);

/* evo_attention_forward_ex that also writes the log-sum-exp of every row, what
 * evo_attention_backward takes: lse [B, H, Lq] fp32, the natural log of the sum over the
 * keys row i sees of exp(q_i . k_j / sqrt(D)); +inf for a row that sees no key. It runs
 * the champion's lse twin (the plain kernel writes no lse, so the calls above keep its
 * speed); an export written before the twins is EVO_ERROR_UNSUPPORTED: export again. */
int evo_attention_forward_lse(const void* q, const void* k, const void* v, void* o,
                              float* lse, int B, int H, int Hkv, int Lq, int Lk, int D, int dtype,
                              int causal, int align, int window_left, int window_right,
                              void* stream);

/* The gradients of O = attention(Q, K, V) for the upstream gradient dO [B, H, Lq, D]: dq
 * [B, H, Lq, D], dk and dv [B, Hkv, Lk, D] (a K/V head's gradient is summed over the query
 * heads that read it), in the dtype given, from the forward's o and lse (those
 * evo_attention_forward_lse wrote for the same arguments). The mask arguments are
 * evo_attention_forward_ex's. Every element of dq, dk and dv is written (zeros for a row
 * that sees no key, a key no row sees). The runtime keeps the workspace (B*H*Lq*(D+1)
 * floats per stream, grown when a call needs more; growing waits for the stream, so
 * capture a graph after one call of the largest shape). EVO_ERROR_UNSUPPORTED when the
 * export has no backward kernel for the head dim and dtype: compute the gradient
 * another way. */
int evo_attention_backward(const void* q, const void* k, const void* v,
                           const void* o, const void* dO, const float* lse,
                           void* dQ, void* dK, void* dV,
                           int B, int H, int Hkv, int Lq, int Lk, int D, int dtype,
                           int causal, int align, int window_left, int window_right, void* stream);

/* The message of this thread's last error ("" after a success). */
const char* evo_last_error(void);

/* The runtime's version, e.g. "0.1.0". */
const char* evo_version(void);

#ifdef __cplusplus
}
#endif

#endif /* EVO_H */
