// bwd_scalar.cuh: what the hand-written backward test kernels share (kernels/ABI.md,
// "The backward ABI") — the element type of the variant, the four kernels' one
// signature, and the scalar fp32 gradients of one key (dK, dV) and of one query row
// (dQ), each with the switches the defective variants turn. Compiled into each kernel
// (every .cu is its own module; `evo gate` puts a kernel's folder on the include path).
//
// Each .cu declares evo_abi, evo_pass, evo_deterministic and evo_bwd_geometry itself:
// the gate tells a backward file from a forward one by the `evo_pass` it declares.
//
// The design of bwd_naive.cu, the right answer the others depart from:
//   pre : one thread per query row: dpsum = rowsum(dO ∘ O) into the workspace;
//   main: one thread per key: loops over the group's query heads and every row that
//         sees the key, dV += P dO, dK += dS Q; writes dK (× scale) and dV, zeros
//         for a key no row sees;
//   dq  : one thread per query row: loops over the keys the row sees, dQ += dS K;
//         writes dQ (× scale), zeros for a row that sees no key.
// No float is added in an order that varies: bitwise repeatable.

#pragma once
// The mask rule the reference applies; the host prepends it to its templates only.
#include "../../kernels/mask.cuh"
// The element type, its conversions, D and the launch's last block.
#include "common.cuh"

// Keys per main block, query rows per dq / pre / post block: one thread each.
#define ROWS 64

// The ABI's signature, shared by the four kernels.
#define EVO_BWD_KERNEL(name)                                                               \
  extern "C" __global__ void name(                                                         \
      const elem_t* Q, const elem_t* K, const elem_t* V, const elem_t* O, const elem_t* dO, \
      const float* lse, elem_t* dQ, elem_t* dK, elem_t* dV, float* ws, int B, int H, int Lq, \
      int Lk, int causal, float scale, int Hkv, int diag, int window_left, int window_right)

// The arguments as one value, for the helpers below.
struct Bwd {
  const elem_t *Q, *K, *V, *O, *dO;
  const float* lse;
  elem_t *dQ, *dK, *dV;
  float* ws;
  int B, H, Lq, Lk, Hkv;
  float scale;
  Mask mask;
  // The workspace: dpsum [B*H*Lq], then an fp32 dQ accumulator [B*H*Lq][D].
  __device__ float* dpsum() const { return ws; }
  __device__ float* dq_acc() const { return ws + (size_t)B * H * Lq; }
};

#define EVO_BWD_ARGS                                                                      \
  Bwd {                                                                                   \
    Q, K, V, O, dO, lse, dQ, dK, dV, ws, B, H, Lq, Lk, Hkv, scale,                        \
        Mask{Lk, causal, diag, window_left, window_right, 0}                              \
  }

// What a defective variant changes; all false is the right backward.
struct Defects {
  bool no_dpsum;          // dS = P ∘ dP: the dpsum term dropped
  bool first_group_head;  // dK, dV from the first query head of the group only
};

__device__ __forceinline__ float dot(const float* a, const elem_t* b) {
  float s = 0.0f;
  for (int c = 0; c < D; ++c) s += a[c] * to_float(b[c]);
  return s;
}

// pre: dpsum of query row blockIdx.x * ROWS + threadIdx.x of head blockIdx.y.
__device__ void dpsum_row(const Bwd& a) {
  const int i = blockIdx.x * ROWS + threadIdx.x;
  if (i >= a.Lq) return;
  const size_t row = (size_t)blockIdx.y * a.Lq + i;
  float s = 0.0f;
  for (int c = 0; c < D; ++c) s += to_float(a.dO[row * D + c]) * to_float(a.O[row * D + c]);
  a.dpsum()[row] = s;
}

// P and dS of query row `row` (flattened over B*H) and one key's k, v (fp32).
__device__ __forceinline__ void p_and_ds(const Bwd& a, size_t row, const float* k,
                                         const float* v, Defects f, float* p, float* ds) {
  *p = expf(dot(k, a.Q + row * D) * a.scale - a.lse[row]);
  const float dp = dot(v, a.dO + row * D);
  *ds = *p * (f.no_dpsum ? dp : dp - a.dpsum()[row]);
}

// main: dK and dV of key blockIdx.x * ROWS + threadIdx.x of K/V head blockIdx.y
// (flattened over B*Hkv), summed over the group's query heads; `write` false leaves
// them unwritten.
__device__ void key_grads(const Bwd& a, Defects f, bool write = true) {
  const int j = blockIdx.x * ROWS + threadIdx.x;
  if (j >= a.Lk) return;
  const int b = blockIdx.y / a.Hkv, g = blockIdx.y % a.Hkv, group = a.H / a.Hkv;
  const size_t key = (size_t)blockIdx.y * a.Lk + j;
  float k[D], v[D], dk[D], dv[D];
  for (int c = 0; c < D; ++c) {
    k[c] = to_float(a.K[key * D + c]);
    v[c] = to_float(a.V[key * D + c]);
    dk[c] = dv[c] = 0.0f;
  }
  const int heads = f.first_group_head ? 1 : group;
  for (int h = g * group; h < g * group + heads; ++h) {
    for (int i = 0; i < a.Lq; ++i) {
      if (a.mask.masked(i, j)) continue;
      const size_t row = ((size_t)b * a.H + h) * a.Lq + i;
      float p, ds;
      p_and_ds(a, row, k, v, f, &p, &ds);
      for (int c = 0; c < D; ++c) {
        dv[c] += p * to_float(a.dO[row * D + c]);
        dk[c] += ds * to_float(a.Q[row * D + c]);
      }
    }
  }
  if (!write) return;
  for (int c = 0; c < D; ++c) {
    a.dK[key * D + c] = from_float(dk[c] * a.scale);
    a.dV[key * D + c] = from_float(dv[c]);
  }
}

// dq: dS K of query row i of head blockIdx.y over keys [j0, j1), added to acc (fp32,
// unscaled).
__device__ void query_grads_over(const Bwd& a, int i, int j0, int j1, Defects f, float* acc) {
  const size_t row = (size_t)blockIdx.y * a.Lq + i;
  const size_t kv = (size_t)kv_head_of(blockIdx.y, a.H, a.Hkv) * a.Lk;
  float k[D], v[D];
  for (int j = j0; j < j1; ++j) {
    for (int c = 0; c < D; ++c) {
      k[c] = to_float(a.K[(kv + j) * D + c]);
      v[c] = to_float(a.V[(kv + j) * D + c]);
    }
    float p, ds;
    p_and_ds(a, row, k, v, f, &p, &ds);
    for (int c = 0; c < D; ++c) acc[c] += ds * k[c];
  }
}

// dq: dQ of query row blockIdx.x * ROWS + threadIdx.x of head blockIdx.y (flattened
// over B*H), over every key it sees, written as T.
__device__ void query_grads(const Bwd& a, Defects f) {
  const int i = blockIdx.x * ROWS + threadIdx.x;
  if (i >= a.Lq) return;
  float acc[D];
  for (int c = 0; c < D; ++c) acc[c] = 0.0f;
  query_grads_over(a, i, a.mask.lo(i), a.mask.hi(i), f, acc);
  const size_t row = (size_t)blockIdx.y * a.Lq + i;
  for (int c = 0; c < D; ++c) a.dQ[row * D + c] = from_float(acc[c] * a.scale);
}
