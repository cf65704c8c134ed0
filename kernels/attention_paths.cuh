// evo: the Ampere template, sections 5-9 (the compute paths): S = Q K^T, the softmax
// and O += P V through shared memory (scalar, WMMA or mma.sync), the FlashAttention-2
// register path, the epilogues. Appended by the host after kernels/attention.cu (sections
// 1-4: the configuration, element helpers, PTX wrappers, tile staging), whose names it
// uses; NVRTC only.

namespace evo {

// ============================================================ 5. S = Q K^T into smem
// Raw dot products (unscaled) into sS[BM][BN+4]; the softmax pass scales/masks.

#if !EVO_P_REGS
#if EVO_QK_MATH == 0
// CUDA cores: one score per thread per step, dot products 8 elements (one
// 16-byte chunk, contiguous in every layout) at a time.
__device__ __forceinline__ float dot_chunk(uint4 a, uint4 b, float acc) {
  const elem2_t* a2 = reinterpret_cast<const elem2_t*>(&a);
  const elem2_t* b2 = reinterpret_cast<const elem2_t*>(&b);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 x = to_float2(a2[e]), y = to_float2(b2[e]);
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
  }
  return acc;
}
__device__ __forceinline__ void qk_to_smem(const elem_t* sQ, const elem_t* sK, float* sS, int ctid,
                                           int /*warp*/, int /*lane*/) {
  for (int idx = ctid; idx < kBM * kBN; idx += kConsumerThreads) {
    const int r = idx / kBN, c = idx % kBN;
    float acc = 0.0f;
#pragma unroll
    for (int ch = 0; ch < kD / 8; ++ch) {
      const uint4 q = *reinterpret_cast<const uint4*>(sQ + tile_off(r, ch * 8));
      const uint4 k = *reinterpret_cast<const uint4*>(sK + tile_off(c, ch * 8));
      acc = dot_chunk(q, k, acc);
    }
    sS[r * kSPitch + c] = acc;
  }
}
#elif EVO_QK_MATH == 1
// WMMA 16x16x16: each warp takes 16x16 tiles of S in turn. K stored [n][d]
// row-major is K^T column-major, so it loads directly as a col_major B.
__device__ __forceinline__ void qk_to_smem(const elem_t* sQ, const elem_t* sK, float* sS, int /*ctid*/,
                                           int warp, int /*lane*/) {
  using namespace nvcuda;
  for (int u = warp; u < (kBM / 16) * (kBN / 16); u += kWarps) {
    const int r0 = (u / (kBN / 16)) * 16, c0 = (u % (kBN / 16)) * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < kD / 16; ++k) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, elem_t, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, elem_t, wmma::col_major> b;
      wmma::load_matrix_sync(a, sQ + r0 * kPitch + k * 16, kPitch);
      wmma::load_matrix_sync(b, sK + c0 * kPitch + k * 16, kPitch);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(sS + r0 * kSPitch + c0, acc, kSPitch, wmma::mem_row_major);
  }
}
#else
// mma.sync: each warp takes 16x16 tiles of S (two m16n8 C fragments).
__device__ __forceinline__ void qk_to_smem(const elem_t* sQ, const elem_t* sK, float* sS, int /*ctid*/,
                                           int warp, int lane) {
  const int g = lane >> 2, t = lane & 3;
  for (int u = warp; u < (kBM / 16) * (kBN / 16); u += kWarps) {
    const int r0 = (u / (kBN / 16)) * 16, c0 = (u % (kBN / 16)) * 16;
    float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      unsigned a[4], b[4];
      ldmatrix_x4(a, sQ + tile_off(r0 + lm_row_a(lane), kk * 16 + lm_col_a(lane)));
      ldmatrix_x4(b, sK + tile_off(c0 + lm_row_b(lane), kk * 16 + lm_col_b(lane)));
      mma_16816(c[0], a, b[0], b[1]);
      mma_16816(c[1], a, b[2], b[3]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = c0 + h * 8 + 2 * t;
      *reinterpret_cast<float2*>(sS + (r0 + g) * kSPitch + col) = make_float2(c[h][0], c[h][1]);
      *reinterpret_cast<float2*>(sS + (r0 + g + 8) * kSPitch + col) = make_float2(c[h][2], c[h][3]);
    }
  }
}
#endif

// ============================================================ 6. softmax in smem
// One warp per row (rows round-robin over the compute warps, so warps beyond
// BM simply idle): scale + mask the raw scores, update the row's running max m
// and sum l, keep alpha = exp(m_old - m_new) for the P.V step, write P as 16-bit.
__device__ __forceinline__ void softmax_smem(const float* sS, elem_t* sP, float* sM, float* sL,
                                             float* sAlpha, float* sO, int warp, int lane, int m0,
                                             int n0, const Mask& mk, float sl) {
  constexpr int kPerLane = (kBN + 31) / 32;
  for (int r = warp; r < kBM; r += kWarps) {
    const int i = m0 + r;
    float v[kPerLane];
    float mx = neg_inf();
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int c = lane + 32 * k;
      v[k] = neg_inf();  // raw (unscaled) scores; scale > 0, so max commutes with it
      if (c < kBN && !mk.masked(i, n0 + c)) v[k] = sS[r * kSPitch + c];
      mx = fmaxf(mx, v[k]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_old = sM[r];
    const float m_new = fmaxf(m_old, mx * sl);
    const float m_use = safe_max(m_new);
    const float alpha = softmax_exp(m_old - m_use);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int c = lane + 32 * k;
      const float p = score_exp(fmaf(v[k], sl, -m_use), k);  // one FFMA per score
      if (c < kBN) sP[r * kPPitch + c] = from_float(p);
      sum += p;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    // The shuffles above already order every lane's read of sM[r] before lane 0's
    // write; the explicit warp barrier costs nothing and lets racecheck see it.
    __syncwarp();
    if (lane == 0) {
      sM[r] = m_new;
      sL[r] = sL[r] * alpha + sum;
      sAlpha[r] = alpha;
    }
#if EVO_PV_MATH == 1
    // WMMA accumulates into O in place, so the row is rescaled here, by its owner.
    for (int d = lane; d < kD; d += 32) sO[r * kOPitch + d] *= alpha;
#endif
  }
}
#endif  // !EVO_P_REGS

// ============================================================ 7. O += P V
// alpha (per row) rescales the old O before the tile's P V is added.

#if EVO_PV_MATH == 0
// CUDA cores: each thread owns pairs of adjacent O columns; pair p is row
// p / (D/2), columns 2 * (p % (D/2)) + {0,1}.
__device__ __forceinline__ float2 pv_pair(const elem_t* sP, const elem_t* sV, int r, int c) {
  float2 acc = make_float2(0.f, 0.f);
#pragma unroll 8
  for (int j = 0; j < kBN; ++j) {
    const float p = to_float(sP[r * kPPitch + j]);
    const float2 v = to_float2(*reinterpret_cast<const elem2_t*>(sV + tile_off(j, c)));
    acc.x = fmaf(p, v.x, acc.x);
    acc.y = fmaf(p, v.y, acc.y);
  }
  return acc;
}
#if EVO_O_REGS
// O in registers: pair ctid + k * threads, k unrolled, so the array is registers.
constexpr int kPairsPerThread = (kBM * kD / 2) / kConsumerThreads;
static_assert((kBM * kD / 2) % kConsumerThreads == 0, "O pairs divide evenly over compute threads");
__device__ __forceinline__ void pv_scalar_regs(const elem_t* sP, const elem_t* sV, const float* sAlpha,
                                               float (&o)[kPairsPerThread][2], int ctid) {
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    const int p = ctid + k * kConsumerThreads;
    const int r = p / (kD / 2), c = (p % (kD / 2)) * 2;
    const float alpha = sAlpha[r];
    const float2 acc = pv_pair(sP, sV, r, c);
    o[k][0] = fmaf(alpha, o[k][0], acc.x);
    o[k][1] = fmaf(alpha, o[k][1], acc.y);
  }
}
#else
__device__ __forceinline__ void pv_scalar_smem(const elem_t* sP, const elem_t* sV, const float* sAlpha,
                                               float* sO, int ctid) {
  for (int p = ctid; p < kBM * kD / 2; p += kConsumerThreads) {
    const int r = p / (kD / 2), c = (p % (kD / 2)) * 2;
    const float alpha = sAlpha[r];
    const float2 acc = pv_pair(sP, sV, r, c);
    float2* o = reinterpret_cast<float2*>(sO + r * kOPitch + c);
    const float2 old = *o;
    *o = make_float2(fmaf(alpha, old.x, acc.x), fmaf(alpha, old.y, acc.y));
  }
}
#endif
#elif EVO_PV_MATH == 1
// WMMA: O (already rescaled by the softmax pass) is the accumulator, loaded
// from and stored back to smem; each warp takes 16x16 O tiles in turn.
__device__ __forceinline__ void pv_wmma(const elem_t* sP, const elem_t* sV, float* sO, int warp) {
  using namespace nvcuda;
  for (int u = warp; u < (kBM / 16) * (kD / 16); u += kWarps) {
    const int r0 = (u / (kD / 16)) * 16, d0 = (u % (kD / 16)) * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, sO + r0 * kOPitch + d0, kOPitch, wmma::mem_row_major);
#pragma unroll
    for (int k = 0; k < kBN / 16; ++k) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, elem_t, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, elem_t, wmma::row_major> b;
      wmma::load_matrix_sync(a, sP + r0 * kPPitch + k * 16, kPPitch);
      wmma::load_matrix_sync(b, sV + k * 16 * kPitch + d0, kPitch);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(sO + r0 * kOPitch + d0, acc, kOPitch, wmma::mem_row_major);
  }
}
#else  // EVO_PV_MATH == 2
// mma.sync with B = V through ldmatrix.trans. The A operand (P) comes from
// the P smem tile here; the register path (section 8) packs it from S instead.
#if !EVO_P_REGS
__device__ __forceinline__ void load_p_frag(unsigned (&a)[4], const elem_t* sP, int r0, int kk,
                                            int lane) {
  ldmatrix_x4(a, sP + (r0 + lm_row_a(lane)) * kPPitch + kk * 16 + lm_col_a(lane));
}
#if EVO_O_REGS
// O in registers: warp w owns rows [w*S*16, (w+1)*S*16) as S m16 slices.
__device__ __forceinline__ void pv_mma_smemp_regso(const elem_t* sP, const elem_t* sV,
                                                   const float* sAlpha,
                                                   float (&o)[kSlices][kD / 8][4], int warp,
                                                   int lane) {
  const int g = lane >> 2;
  const int wrow0 = warp * kSlices * 16;
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    const float a_lo = sAlpha[wrow0 + s * 16 + g], a_hi = sAlpha[wrow0 + s * 16 + g + 8];
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      o[s][dt][0] *= a_lo; o[s][dt][1] *= a_lo;
      o[s][dt][2] *= a_hi; o[s][dt][3] *= a_hi;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {
    unsigned a[kSlices][4];
#pragma unroll
    for (int s = 0; s < kSlices; ++s) load_p_frag(a[s], sP, wrow0 + s * 16, kk, lane);
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      unsigned b[4];
      ldmatrix_x4_trans(b, sV + tile_off(kk * 16 + lm_row_a(lane), dp * 16 + lm_col_a(lane)));
#pragma unroll
      for (int s = 0; s < kSlices; ++s) {
        mma_16816(o[s][2 * dp], a[s], b[0], b[1]);
        mma_16816(o[s][2 * dp + 1], a[s], b[2], b[3]);
      }
    }
  }
}
#else
// O in smem: 16x16 O tiles round-robin over warps; C is loaded scaled by alpha.
__device__ __forceinline__ void pv_mma_smemp_smemo(const elem_t* sP, const elem_t* sV,
                                                   const float* sAlpha, float* sO, int warp,
                                                   int lane) {
  const int g = lane >> 2, t = lane & 3;
  for (int u = warp; u < (kBM / 16) * (kD / 16); u += kWarps) {
    const int r0 = (u / (kD / 16)) * 16, d0 = (u % (kD / 16)) * 16;
    const float a_lo = sAlpha[r0 + g], a_hi = sAlpha[r0 + g + 8];
    float c[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 lo = *reinterpret_cast<const float2*>(sO + (r0 + g) * kOPitch + d0 + h * 8 + 2 * t);
      const float2 hi = *reinterpret_cast<const float2*>(sO + (r0 + g + 8) * kOPitch + d0 + h * 8 + 2 * t);
      c[h][0] = lo.x * a_lo; c[h][1] = lo.y * a_lo;
      c[h][2] = hi.x * a_hi; c[h][3] = hi.y * a_hi;
    }
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      unsigned a[4], b[4];
      load_p_frag(a, sP, r0, kk, lane);
      ldmatrix_x4_trans(b, sV + tile_off(kk * 16 + lm_row_a(lane), d0 + lm_col_a(lane)));
      mma_16816(c[0], a, b[0], b[1]);
      mma_16816(c[1], a, b[2], b[3]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      *reinterpret_cast<float2*>(sO + (r0 + g) * kOPitch + d0 + h * 8 + 2 * t) = make_float2(c[h][0], c[h][1]);
      *reinterpret_cast<float2*>(sO + (r0 + g + 8) * kOPitch + d0 + h * 8 + 2 * t) = make_float2(c[h][2], c[h][3]);
    }
  }
}
#endif
#endif  // !EVO_P_REGS
#endif  // EVO_PV_MATH

// ============================================================ 8. register path (FA2)
// Each warp owns kSlices m16 slices of rows, S and P never leave registers:
// the m16n8 C fragments of two adjacent 8-column tiles of S, packed to 16 bit,
// are the A fragment of P for one k16 step. Row max / sum need only the 4
// lanes of a quad (shfl_xor 1, 2). l is kept per lane (partial over the
// lane's columns) and reduced across the quad once, in the epilogue.

#if EVO_P_REGS
__device__ __forceinline__ void tile_regs(const elem_t* sQ, const unsigned (&qf)[kSlices][kQFrags][4],
                                          const elem_t* sK, const elem_t* sV,
                                          float (&m)[kSlices][2], float (&l)[kSlices][2],
#if EVO_O_REGS
                                          float (&o)[kSlices][kD / 8][4],
#else
                                          float* sO,
#endif
                                          int warp, int lane, int m0, int n0, const Mask& mk,
                                          float sl) {
  const int g = lane >> 2, t = lane & 3;
  const int wrow0 = warp * kSlices * 16;

  // S = Q K^T: k outer so each K fragment is loaded once for all slices.
  float sacc[kSlices][kBN / 8][4];
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) sacc[s][nt][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    unsigned qa[kSlices][4];
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      if constexpr (kHoldQ) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[s][e] = qf[s][kk][e];
      } else {
        ldmatrix_x4(qa[s], sQ + tile_off(wrow0 + s * 16 + lm_row_a(lane), kk * 16 + lm_col_a(lane)));
      }
    }
#pragma unroll
    for (int nn = 0; nn < kBN / 16; ++nn) {
      unsigned kb[4];
      ldmatrix_x4(kb, sK + tile_off(nn * 16 + lm_row_b(lane), kk * 16 + lm_col_b(lane)));
#pragma unroll
      for (int s = 0; s < kSlices; ++s) {
        mma_16816(sacc[s][2 * nn], qa[s], kb[0], kb[1]);
        mma_16816(sacc[s][2 * nn + 1], qa[s], kb[2], kb[3]);
      }
    }
  }

  // Online softmax on the fragments. The mask is needed only on tiles that reach
  // past Lk or past a row's first or last visible key (uniform over the CTA).
  const bool need_mask = !mk.clear(m0, m0 + kBM - 1, n0, kBN);
  float alpha[kSlices][2];
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // h = 0: row g (c0, c1); h = 1: row g + 8 (c2, c3)
      const int i = m0 + wrow0 + s * 16 + g + 8 * h;
      float mx = neg_inf();
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          // Raw scores: scale > 0 commutes with max, and is folded into the
          // exponent's FFMA below (one FFMA + one MUFU per score).
          float v = sacc[s][nt][2 * h + e];
          if (need_mask && mk.masked(i, n0 + nt * 8 + 2 * t + e)) v = neg_inf();
          sacc[s][nt][2 * h + e] = v;
          mx = fmaxf(mx, v);
        }
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[s][h], mx * sl);
      const float m_use = safe_max(m_new);
      alpha[s][h] = softmax_exp(m[s][h] - m_use);
      m[s][h] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = score_exp(fmaf(sacc[s][nt][2 * h + e], sl, -m_use), e);
          sacc[s][nt][2 * h + e] = p;
          sum += p;
        }
      }
      l[s][h] = l[s][h] * alpha[s][h] + sum;
    }
  }

  // P as A fragments: k16 step kk = n-tiles 2kk (cols 2t..) and 2kk+1 (cols 2t+8..).
  unsigned pa[kSlices][kBN / 16][4];
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      pa[s][kk][0] = pack2(sacc[s][2 * kk][0], sacc[s][2 * kk][1]);
      pa[s][kk][1] = pack2(sacc[s][2 * kk][2], sacc[s][2 * kk][3]);
      pa[s][kk][2] = pack2(sacc[s][2 * kk + 1][0], sacc[s][2 * kk + 1][1]);
      pa[s][kk][3] = pack2(sacc[s][2 * kk + 1][2], sacc[s][2 * kk + 1][3]);
    }

#if EVO_O_REGS
  // O = alpha * O + P V, O in C fragments.
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      o[s][dt][0] *= alpha[s][0]; o[s][dt][1] *= alpha[s][0];
      o[s][dt][2] *= alpha[s][1]; o[s][dt][3] *= alpha[s][1];
    }
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      unsigned vb[4];
      ldmatrix_x4_trans(vb, sV + tile_off(kk * 16 + lm_row_a(lane), dp * 16 + lm_col_a(lane)));
#pragma unroll
      for (int s = 0; s < kSlices; ++s) {
        mma_16816(o[s][2 * dp], pa[s][kk], vb[0], vb[1]);
        mma_16816(o[s][2 * dp + 1], pa[s][kk], vb[2], vb[3]);
      }
    }
#else
  // O in smem, but the rows are this warp's own: no barrier needed. One
  // 16-column strip of O at a time is brought into C fragments.
#pragma unroll
  for (int dp = 0; dp < kD / 16; ++dp) {
    float c[kSlices][2][4];
#pragma unroll
    for (int s = 0; s < kSlices; ++s)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = wrow0 + s * 16 + g, col = dp * 16 + hh * 8 + 2 * t;
        const float2 lo = *reinterpret_cast<const float2*>(sO + r * kOPitch + col);
        const float2 hi = *reinterpret_cast<const float2*>(sO + (r + 8) * kOPitch + col);
        c[s][hh][0] = lo.x * alpha[s][0]; c[s][hh][1] = lo.y * alpha[s][0];
        c[s][hh][2] = hi.x * alpha[s][1]; c[s][hh][3] = hi.y * alpha[s][1];
      }
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      unsigned vb[4];
      ldmatrix_x4_trans(vb, sV + tile_off(kk * 16 + lm_row_a(lane), dp * 16 + lm_col_a(lane)));
#pragma unroll
      for (int s = 0; s < kSlices; ++s) {
        mma_16816(c[s][0], pa[s][kk], vb[0], vb[1]);
        mma_16816(c[s][1], pa[s][kk], vb[2], vb[3]);
      }
    }
#pragma unroll
    for (int s = 0; s < kSlices; ++s)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = wrow0 + s * 16 + g, col = dp * 16 + hh * 8 + 2 * t;
        *reinterpret_cast<float2*>(sO + r * kOPitch + col) = make_float2(c[s][hh][0], c[s][hh][1]);
        *reinterpret_cast<float2*>(sO + (r + 8) * kOPitch + col) = make_float2(c[s][hh][2], c[s][hh][3]);
      }
  }
#endif
}
#endif  // EVO_P_REGS

// ============================================================ 9. epilogues
// Rows >= Lq are never written. Unsplit: O = o / l as elem_t. Split: the
// workspace gets o / l (fp32) and the natural-log lse; a row whose split saw no
// key has l = 0 and gets o = 0, lse = -inf (weight 0 in the combine). In the lse twin
// (EVO_LSE = 1), unsplit, the row's lse also goes to `lse` when the host asks for it
// (evo_lse; +inf for a row that saw no key); split, the combine writes it.

struct Out {
  elem_t* O;
  float* ws_o;
  float* ws_lse;
#if EVO_LSE
  float* lse;  // null: not asked (a uniform branch)
#endif
  size_t row_base;  // (split * B*H + bh) * Lq for the workspace, bh * Lq for O
  int m0, Lq;
};

__device__ __forceinline__ void store_pair(const Out& out, int r, int c, float x, float y) {
  const size_t idx = (out.row_base + out.m0 + r) * kD + c;
#if EVO_SPLIT_KV > 1
  *reinterpret_cast<float2*>(out.ws_o + idx) = make_float2(x, y);
#else
  *reinterpret_cast<elem2_t*>(out.O + idx) = from_float2(x, y);
#endif
}
__device__ __forceinline__ void store_lse(const Out& out, int r, float m, float l) {
#if EVO_SPLIT_KV > 1
  out.ws_lse[out.row_base + out.m0 + r] = row_lse(m, l);
#elif EVO_LSE
  if (out.lse != nullptr)
    out.lse[out.row_base + out.m0 + r] = l > 0.0f ? row_lse(m, l) : __int_as_float(0x7f800000);
#endif
}
__device__ __forceinline__ float inv_or_zero(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

#if !EVO_O_REGS
// O in smem (after a consumer barrier): pairs round-robin over the compute threads.
__device__ __forceinline__ void epilogue_smem(const Out& out, const float* sO, const float* sM,
                                              const float* sL, int ctid) {
  for (int p = ctid; p < kBM * kD / 2; p += kConsumerThreads) {
    const int r = p / (kD / 2), c = (p % (kD / 2)) * 2;
    if (out.m0 + r >= out.Lq) continue;
    const float inv = inv_or_zero(sL[r]);
    const float2 v = *reinterpret_cast<const float2*>(sO + r * kOPitch + c);
    store_pair(out, r, c, v.x * inv, v.y * inv);
  }
  for (int r = ctid; r < kBM; r += kConsumerThreads)
    if (out.m0 + r < out.Lq) store_lse(out, r, sM[r], sL[r]);
}
#endif

#if EVO_O_REGS && EVO_REG_MMA_STATE
// O in mma C fragments; m, l per (slice, half) already quad-reduced.
__device__ __forceinline__ void epilogue_frags(const Out& out, const float (&o)[kSlices][kD / 8][4],
                                               const float (&m)[kSlices][2],
                                               const float (&l)[kSlices][2], int warp, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * kSlices * 16 + s * 16 + g + 8 * h;
      if (out.m0 + r >= out.Lq) continue;
      const float inv = inv_or_zero(l[s][h]);
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt)
        store_pair(out, r, dt * 8 + 2 * t, o[s][dt][2 * h] * inv, o[s][dt][2 * h + 1] * inv);
      if (t == 0) store_lse(out, r, m[s][h], l[s][h]);
    }
}
#endif

}  // namespace evo
