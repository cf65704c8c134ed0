// evo: the Ampere backward template, section 4 (the kernels): evo_attention_bwd (main)
// and evo_attention_bwd_dq. Appended by the host after kernels/attention_bwd.cu
// (sections 1-2) and kernels/attention_bwd_common.cuh (section 3), whose names it uses
// (queries_of_keys, the workspace); NVRTC only.
//
// Fragment conventions (mma.sync m16n8k16): a C fragment of an m16 slice and an 8-column
// tile gives lane (g = lane / 4, t = lane % 4) rows g, g + 8 and columns 2t, 2t + 1; the
// two C tiles 2kk, 2kk + 1 of a row slice, packed to 16 bits, are the A fragment of k16
// step kk (FA2's reuse), so P^T and dS^T feed dV += P^T dO and dK += dS^T Q (and dS the
// dq kernel's dQ += dS K) without leaving the registers.

// ============================================================ 4. the kernels

namespace evo {

// acc[s][nt] = A B^T over D for a warp's slices: A rows from `sa` (rows a0 + 16 s), B
// rows from `sb` (rows 0..N), both [rows][D] tiles. Main: S^T = K Q^T or dP^T = V dO^T;
// the dq kernel: S = Q K^T or dP = dO V^T.
template <int SLICES, int N>
__device__ __forceinline__ void gemm_rows(float (&acc)[SLICES][N / 8][4], const elem_t* sa,
                                          int a0, const elem_t* sb, int lane) {
#pragma unroll
  for (int s = 0; s < SLICES; ++s)
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[s][nt][e] = 0.0f;
  // Unrolled by 2, not fully: the k steps index no register array, and a full unroll
  // hoists every step's ldmatrix addresses (main at D128, fa2-bwd: 255 registers and
  // 44 bytes of spills fully unrolled, 252 and none by 2; NVRTC 13.5, sm_90).
#pragma unroll 2
  for (int kk = 0; kk < kD / 16; ++kk) {
    unsigned a[SLICES][4];
#pragma unroll
    for (int s = 0; s < SLICES; ++s)
      ldmatrix_x4(a[s], sa + tile_off(a0 + s * 16 + lm_row_a(lane), kk * 16 + lm_col_a(lane)));
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      unsigned b[4];
      ldmatrix_x4(b, sb + tile_off(nn * 16 + lm_row_b(lane), kk * 16 + lm_col_b(lane)));
#pragma unroll
      for (int s = 0; s < SLICES; ++s) {
        mma_16816(acc[s][2 * nn], a[s], b[0], b[1]);
        mma_16816(acc[s][2 * nn + 1], a[s], b[2], b[3]);
      }
    }
  }
}

// The A fragment of k16 step kk from the fp32 C tiles 2kk and 2kk + 1 of one slice.
template <int NT>
__device__ __forceinline__ void c_to_a(unsigned (&a)[4], const float (&c)[NT][4], int kk) {
  a[0] = pack2(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack2(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// acc[s] += A[s] B with A[s] = the 16-bit form of c[s] ([16][K], K = 8 * NT) and B the
// [K][D] tile `sb` (row-major, through ldmatrix.trans). With `ds` not null the A
// fragments are also stored there, transposed back to [16 s + row][K] order: main's
// dS^T for the dQ step.
template <int SLICES, int NT>
__device__ __forceinline__ void gemm_c_tile(float (&acc)[SLICES][kD / 8][4],
                                            const float (&c)[SLICES][NT][4], const elem_t* sb,
                                            elem_t* ds, int ds_row0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    unsigned a[SLICES][4];
#pragma unroll
    for (int s = 0; s < SLICES; ++s) {
      c_to_a(a[s], c[s], kk);
      if (ds != nullptr) {
        elem_t* row = ds + (ds_row0 + s * 16 + g) * kDsPitch + kk * 16 + 2 * t;
        *reinterpret_cast<unsigned*>(row) = a[s][0];
        *reinterpret_cast<unsigned*>(row + 8 * kDsPitch) = a[s][1];
        *reinterpret_cast<unsigned*>(row + 8) = a[s][2];
        *reinterpret_cast<unsigned*>(row + 8 * kDsPitch + 8) = a[s][3];
      }
    }
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      unsigned b[4];
      ldmatrix_x4_trans(b, sb + tile_off(kk * 16 + lm_row_a(lane), dp * 16 + lm_col_a(lane)));
#pragma unroll
      for (int s = 0; s < SLICES; ++s) {
        mma_16816(acc[s][2 * dp], a[s], b[0], b[1]);
        mma_16816(acc[s][2 * dp + 1], a[s], b[2], b[3]);
      }
    }
  }
}

// main's dQ step: dQ[m0.., :] += dS K over the CTA's keys, into the fp32 accumulator.
// The warps split [BLOCK_M][D] into units of 16 rows x kDqCols columns (as wide as
// leaves every warp a unit); A = dS by ldmatrix.trans of dS^T, B = K by ldmatrix.trans.
__host__ __device__ constexpr int dq_cols() {
  return (kBM / 16) * (kD / 64) >= kWarps && kD % 64 == 0 ? 64
         : (kBM / 16) * (kD / 32) >= kWarps               ? 32
                                                          : 16;
}
__device__ __forceinline__ void dq_step(const elem_t* sDs, const elem_t* sK, float* acc_rows,
                                        int m0, int Lq, int warp, int lane) {
  constexpr int kCols = dq_cols();
  constexpr int kChunks = kD / kCols;
  constexpr int kUnits = (kBM / 16) * kChunks;
  const int g = lane >> 2, t = lane & 3;
  for (int u = warp; u < kUnits; u += kWarps) {
    const int ms = u / kChunks, d0 = (u % kChunks) * kCols;
    float acc[kCols / 8][4];
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      unsigned a[4];
      ldmatrix_x4_trans(a, sDs + (kk * 16 + lm_row_b(lane)) * kDsPitch + ms * 16 + lm_col_b(lane));
#pragma unroll
      for (int dp = 0; dp < kCols / 16; ++dp) {
        unsigned b[4];
        ldmatrix_x4_trans(b, sK + tile_off(kk * 16 + lm_row_a(lane), d0 + dp * 16 + lm_col_a(lane)));
        mma_16816(acc[2 * dp], a, b[0], b[1]);
        mma_16816(acc[2 * dp + 1], a, b[2], b[3]);
      }
    }
#if __CUDA_ARCH__ >= 900
    // One 16-byte reduction (sm_90's vector atomics) per lane and C tile: lanes t and
    // t ^ 1 swap pairs, so an even t holds row g, columns 2t..2t+3, and an odd t row
    // g + 8, columns 2t-2..2t+1 (16-byte aligned: the accumulator's rows are).
    const bool odd = t & 1;
    const int q = m0 + ms * 16 + g + (odd ? 8 : 0);
    float* row = acc_rows + (size_t)q * kD + d0 + 2 * (t & ~1);
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) {
      const float r0 = __shfl_xor_sync(0xffffffffu, odd ? acc[nt][0] : acc[nt][2], 1);
      const float r1 = __shfl_xor_sync(0xffffffffu, odd ? acc[nt][1] : acc[nt][3], 1);
      const float4 v = odd ? make_float4(r0, r1, acc[nt][2], acc[nt][3])
                           : make_float4(acc[nt][0], acc[nt][1], r0, r1);
      if (q < Lq) atomicAdd(reinterpret_cast<float4*>(row + nt * 8), v);
    }
#else
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int q = m0 + ms * 16 + g + 8 * hh;
      if (q >= Lq) continue;
      float* row = acc_rows + (size_t)q * kD + d0 + 2 * t;
#pragma unroll
      for (int nt = 0; nt < kCols / 8; ++nt) {
        atomicAdd(row + nt * 8, acc[nt][2 * hh]);
        atomicAdd(row + nt * 8 + 1, acc[nt][2 * hh + 1]);
      }
    }
#endif
  }
}

}  // namespace evo

using namespace evo;

// Register budget: as the forward template (kernels/attention_kernel.cuh), a cap comes
// from the source (__maxnreg__, with the EVO_MIN_BLOCKS bound folded in), since
// __launch_bounds__ makes ptxas ignore --maxrregcount and the two cannot be combined.
#if EVO_MAX_REGS > 0
#define EVO_BWD_BOUNDS __maxnreg__(kRegCap)
#else
#define EVO_BWD_BOUNDS __launch_bounds__(kThreads, EVO_MIN_BLOCKS)
#endif

// grid (ceil(Lk / BLOCK_N), B*Hkv), block WARPS*32, dynamic smem EVO_SMEM_BYTES.
// A CTA owns keys [n0, n0 + BLOCK_N) of K/V head blockIdx.y: K and V stay in shared
// memory, dK and dV in registers (warp w: keys w*BN/W..), while the Q/dO ring streams
// every (query head of the group, query block that sees these keys) item.
extern "C" __global__ void EVO_BWD_BOUNDS
evo_attention_bwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                  const elem_t* __restrict__ V, const elem_t* __restrict__ O,
                  const elem_t* __restrict__ dO, const float* __restrict__ lse,
                  elem_t* __restrict__ dQ, elem_t* __restrict__ dK, elem_t* __restrict__ dV,
                  float* __restrict__ ws, int B, int H, int Lq, int Lk, int causal, float scale,
                  int Hkv, int diag, int window_left, int window_right) {
  extern __shared__ __align__(128) unsigned char smem[];
  elem_t* sK = reinterpret_cast<elem_t*>(smem + kMainKOff);
  elem_t* sV = reinterpret_cast<elem_t*>(smem + kMainVOff);
  elem_t* sDs = reinterpret_cast<elem_t*>(smem + kMainDsOff);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kBN;
  const int kvh = blockIdx.y;  // b * Hkv + K/V head
  const int group = H / Hkv;
  const int bh0 = (kvh / Hkv) * H + (kvh % Hkv) * group;  // the group's first query head
  const Mask mk{Lk, causal, diag, window_left, window_right, 0};
  const float sl = exp_consts(scale, 0.0f).x;
  float* dq_acc = dq_accumulator(ws);
  const float* dpsum = dpsum_of(ws, B, H, Lq);

  // The work: query blocks [mb0, mb0 + nmb) of each of the group's query heads.
  const int2 rows = queries_of_keys(mk, Lq, n0, min(n0 + kBN, Lk));
  const int mb0 = rows.x / kBM;
  const int nmb = rows.x <= rows.y ? rows.y / kBM - mb0 + 1 : 0;
  const int items = nmb * group;

  auto stage_q = [&](int st) {
    return reinterpret_cast<elem_t*>(smem + kMainQOff + st * kMainStageBytes);
  };
  auto stage_do = [&](int st) { return stage_q(st) + kBM * kPitch; };
  auto stage_lse = [&](int st) {
    return reinterpret_cast<float*>(smem + kMainStatsOff) + st * 2 * kBM;
  };
  auto issue = [&](int st, int item) {
    const int bh = bh0 + item / nmb, m0 = (mb0 + item % nmb) * kBM;
    load_tile<kBM>(stage_q(st), Q + (size_t)bh * Lq * kD, m0, Lq, tid);
    load_tile<kBM>(stage_do(st), dO + (size_t)bh * Lq * kD, m0, Lq, tid);
    load_vec<kBM>(stage_lse(st), lse + (size_t)bh * Lq, m0, Lq, tid);
    load_vec<kBM>(stage_lse(st) + kBM, dpsum + (size_t)bh * Lq, m0, Lq, tid);
  };

  // K and V once, as the oldest cp.async group.
  load_tile<kBN>(sK, K + (size_t)kvh * Lk * kD, n0, Lk, tid);
  load_tile<kBN>(sV, V + (size_t)kvh * Lk * kD, n0, Lk, tid);
  cp_async_commit();

  float dk[kKeySlices][kD / 8][4], dv[kKeySlices][kD / 8][4];
#pragma unroll
  for (int s = 0; s < kKeySlices; ++s)
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[s][dt][e] = dv[s][dt][e] = 0.0f;

  const int wk0 = warp * kWarpKeys;  // the warp's first key in the tile
  auto compute = [&](int st, int item) {
    const elem_t* sQ = stage_q(st);
    const elem_t* sdO = stage_do(st);
    const float* sLse = stage_lse(st);
    const float* sDp = sLse + kBM;
    const int bh = bh0 + item / nmb, m0 = (mb0 + item % nmb) * kBM;
    const bool need_mask = !mk.clear(m0, min(m0 + kBM, Lq) - 1, n0, kBN);

    // P^T = exp(S^T * scale - lse), column (query) by column; 0 where masked. Query rows
    // past Lq carry zero Q, dO, lse and dpsum: their P is finite and adds nothing.
    float p[kKeySlices][kBM / 8][4];
    gemm_rows<kKeySlices, kBM>(p, sK, wk0, sQ, lane);
#pragma unroll
    for (int nt = 0; nt < kBM / 8; ++nt) {
      const int q = nt * 8 + 2 * t;
      const float2 l2 = *reinterpret_cast<const float2*>(sLse + q);
      const float la = exp_consts(scale, l2.x).y, lb = exp_consts(scale, l2.y).y;
#pragma unroll
      for (int s = 0; s < kKeySlices; ++s)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int j = n0 + wk0 + s * 16 + g + 8 * hh;
          float p0 = score_exp<0>(p[s][nt][2 * hh], sl, la);
          float p1 = score_exp<1>(p[s][nt][2 * hh + 1], sl, lb);
          if (need_mask) {
            if (mk.masked(m0 + q, j)) p0 = 0.0f;
            if (mk.masked(m0 + q + 1, j)) p1 = 0.0f;
          }
          p[s][nt][2 * hh] = p0;
          p[s][nt][2 * hh + 1] = p1;
        }
    }
    // dV += P^T dO.
    gemm_c_tile<kKeySlices, kBM / 8>(dv, p, sdO, nullptr, 0, lane);
    // dS^T = P^T (dP^T - dpsum), dP^T = V dO^T. (Computing dP^T in the same k loop as
    // S^T, both accumulators live, measured no faster: within 1-2%, run 4 of
    // experiments/2026-11-26-h100-bwd-dev, and at the register edge at D128.)
    float ds[kKeySlices][kBM / 8][4];
    gemm_rows<kKeySlices, kBM>(ds, sV, wk0, sdO, lane);
#pragma unroll
    for (int nt = 0; nt < kBM / 8; ++nt) {
      const float2 d2 = *reinterpret_cast<const float2*>(sDp + nt * 8 + 2 * t);
#pragma unroll
      for (int s = 0; s < kKeySlices; ++s)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          ds[s][nt][2 * hh] = p[s][nt][2 * hh] * (ds[s][nt][2 * hh] - d2.x);
          ds[s][nt][2 * hh + 1] = p[s][nt][2 * hh + 1] * (ds[s][nt][2 * hh + 1] - d2.y);
        }
    }
    // dK += dS^T Q (scaled once at the end); with the atomic dQ, dS^T goes to shared
    // memory on the way for the dQ step.
    gemm_c_tile<kKeySlices, kBM / 8>(dk, ds, sQ, kDqSeparate ? nullptr : sDs, wk0, lane);
    if constexpr (!kDqSeparate) {
      __syncthreads();  // dS^T complete (and the next item waits at the loop's barrier)
      dq_step(sDs, sK, dq_acc + (size_t)bh * Lq * kD, m0, Lq, warp, lane);
    }
  };

  // The Q/dO pipeline, the forward's protocol: per item, wait for its group, a barrier
  // (its tiles visible to all; every warp done with the item before, whose stage and
  // dS^T are reused), issue item + STAGES - 1 into the stage item - 1 used, compute.
  // Groups are committed even when empty, so wait_group's count follows the items.
  if constexpr (kStages > 1) {
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i < items) issue(i, i);
      cp_async_commit();
    }
    for (int i = 0; i < items; ++i) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int nxt = i + kStages - 1;
      if (nxt < items) issue(nxt % kStages, nxt);
      cp_async_commit();
      compute(i % kStages, i);
    }
  } else {
    for (int i = 0; i < items; ++i) {
      __syncthreads();
      issue(0, i);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      compute(0, i);
    }
  }
  cp_async_wait<0>();  // no copy may still be writing shared memory at exit

  // dK = scale * sum dS^T Q, dV = sum P^T dO; keys no query sees get zeros.
#pragma unroll
  for (int s = 0; s < kKeySlices; ++s)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int j = n0 + wk0 + s * 16 + g + 8 * hh;
      if (j >= Lk) continue;
      const size_t row = ((size_t)kvh * Lk + j) * kD + 2 * t;
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) {
        *reinterpret_cast<elem2_t*>(dK + row + dt * 8) =
            from_float2(dk[s][dt][2 * hh] * scale, dk[s][dt][2 * hh + 1] * scale);
        *reinterpret_cast<elem2_t*>(dV + row + dt * 8) =
            from_float2(dv[s][dt][2 * hh], dv[s][dt][2 * hh + 1]);
      }
    }
}

// grid (ceil(Lq / BLOCK_M), B*H), block WARPS*32, dynamic smem EVO_DQ_SMEM_BYTES (only
// with EVO_DQ_SEPARATE; an empty kernel otherwise). A CTA owns BLOCK_M query rows (warp
// w: rows w*BM/W..) and streams the K/V tiles they see through a STAGES ring:
// S = Q K^T, P, dP = dO V^T and dS in registers, dQ += dS K with dS as the A operand.
// No atomics: dQ is written once, so the backward is bitwise repeatable.
extern "C" __global__ void EVO_BWD_BOUNDS
evo_attention_bwd_dq(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                     const elem_t* __restrict__ V, const elem_t* __restrict__ O,
                     const elem_t* __restrict__ dO, const float* __restrict__ lse,
                     elem_t* __restrict__ dQ, elem_t* __restrict__ dK, elem_t* __restrict__ dV,
                     float* __restrict__ ws, int B, int H, int Lq, int Lk, int causal,
                     float scale, int Hkv, int diag, int window_left, int window_right) {
#if EVO_DQ_SEPARATE
  extern __shared__ __align__(128) unsigned char smem[];
  elem_t* sQ = reinterpret_cast<elem_t*>(smem + kDqQOff);
  elem_t* sdO = reinterpret_cast<elem_t*>(smem + kDqDoOff);
  float* sLse = reinterpret_cast<float*>(smem + kDqStatsOff);
  float* sDp = sLse + kBM;
  auto stage_k = [&](int st) {
    return reinterpret_cast<elem_t*>(smem + kDqKvOff + st * kDqStageBytes);
  };
  auto stage_v = [&](int st) { return stage_k(st) + kBN * kPitch; };

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  // Causal: the last query blocks see the most tiles; hand them out first.
  const int m0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kBM;
  const int bh = blockIdx.y;
  const size_t kvh = kv_head_of(bh, H, Hkv);
  const Mask mk{Lk, causal, diag, window_left, window_right, 0};
  const float sl = exp_consts(scale, 0.0f).x;
  const elem_t* Kh = K + kvh * Lk * kD;
  const elem_t* Vh = V + kvh * Lk * kD;
  const int2 seen = mk.tiles(m0, min(m0 + kBM, Lq) - 1, kBN);
  const int nt_kv = seen.y - seen.x;

  // Q, dO, lse, dpsum once, as the oldest group.
  load_tile<kBM>(sQ, Q + (size_t)bh * Lq * kD, m0, Lq, tid);
  load_tile<kBM>(sdO, dO + (size_t)bh * Lq * kD, m0, Lq, tid);
  load_vec<kBM>(sLse, lse + (size_t)bh * Lq, m0, Lq, tid);
  load_vec<kBM>(sDp, dpsum_of(ws, B, H, Lq) + (size_t)bh * Lq, m0, Lq, tid);
  cp_async_commit();
  auto issue = [&](int st, int tile) {
    load_tile<kBN>(stage_k(st), Kh, tile * kBN, Lk, tid);
    load_tile<kBN>(stage_v(st), Vh, tile * kBN, Lk, tid);
  };

  const int wr0 = warp * kWarpRows;
  float dq[kRowSlices][kD / 8][4];
#pragma unroll
  for (int s = 0; s < kRowSlices; ++s)
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) dq[s][dt][0] = dq[s][dt][1] = dq[s][dt][2] = dq[s][dt][3] = 0.0f;

  auto compute = [&](int st, int tile) {
    const elem_t* sK = stage_k(st);
    const elem_t* sV = stage_v(st);
    const int n0 = tile * kBN;
    const bool need_mask = !mk.clear(m0, min(m0 + kBM, Lq) - 1, n0, kBN);
    float p[kRowSlices][kBN / 8][4], ds[kRowSlices][kBN / 8][4];
    gemm_rows<kRowSlices, kBN>(p, sQ, wr0, sK, lane);
    gemm_rows<kRowSlices, kBN>(ds, sdO, wr0, sV, lane);
#pragma unroll
    for (int s = 0; s < kRowSlices; ++s)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = wr0 + s * 16 + g + 8 * hh;
        const float ll = exp_consts(scale, sLse[r]).y, dps = sDp[r];
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt) {
          const int j = n0 + nt * 8 + 2 * t;
          float p0 = score_exp<0>(p[s][nt][2 * hh], sl, ll);
          float p1 = score_exp<1>(p[s][nt][2 * hh + 1], sl, ll);
          if (need_mask) {
            if (mk.masked(m0 + r, j)) p0 = 0.0f;
            if (mk.masked(m0 + r, j + 1)) p1 = 0.0f;
          }
          ds[s][nt][2 * hh] = p0 * (ds[s][nt][2 * hh] - dps);
          ds[s][nt][2 * hh + 1] = p1 * (ds[s][nt][2 * hh + 1] - dps);
        }
      }
    gemm_c_tile<kRowSlices, kBN / 8>(dq, ds, sK, nullptr, 0, lane);
  };

  if constexpr (kStages > 1) {
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i < nt_kv) issue(i, seen.x + i);
      cp_async_commit();
    }
    for (int i = 0; i < nt_kv; ++i) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int nxt = i + kStages - 1;
      if (nxt < nt_kv) issue(nxt % kStages, seen.x + nxt);
      cp_async_commit();
      compute(i % kStages, seen.x + i);
    }
  } else {
    for (int i = 0; i < nt_kv; ++i) {
      __syncthreads();
      issue(0, seen.x + i);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      compute(0, seen.x + i);
    }
  }
  cp_async_wait<0>();

  // dQ = scale * sum dS K; a row that sees no key gets zeros.
#pragma unroll
  for (int s = 0; s < kRowSlices; ++s)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int q = m0 + wr0 + s * 16 + g + 8 * hh;
      if (q >= Lq) continue;
      elem_t* row = dQ + ((size_t)bh * Lq + q) * kD + 2 * t;
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt)
        *reinterpret_cast<elem2_t*>(row + dt * 8) =
            from_float2(dq[s][dt][2 * hh] * scale, dq[s][dt][2 * hh + 1] * scale);
    }
#endif
}
