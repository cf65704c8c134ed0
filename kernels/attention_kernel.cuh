// evo: the Ampere template, section 10 (the kernels): evo_attention_fwd, the pipeline
// over the K/V tiles with the paths of kernels/attention_paths.cuh. Appended by the host
// after kernels/attention.cu (sections 1-4) and kernels/attention_paths.cuh (5-9); NVRTC
// only.

// ============================================================ 10. the kernels

using namespace evo;

// Register budget. __launch_bounds__ makes ptxas ignore NVRTC's --maxrregcount
// (measured: NVRTC 13.5, sm_90), so a register cap must come from the source:
// with EVO_MAX_REGS > 0 the kernel is declared __maxnreg__(cap) instead, cap
// also clipped to what EVO_MIN_BLOCKS resident blocks of kThreads allow. The
// register file is 64K per SM in four 16K quarters, one per warp scheduler, with
// a CTA's warps spread over them: the fullest quarter holds ceil(warps / 4), so
// 9 warps of 224 registers do not launch although 9 x 32 x 224 < 64K (measured on
// an H100: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, experiments/2026-11-25-h100-models
// run M2). Registers go per thread in units of 8.
// The two qualifiers cannot be combined on one kernel.
#if EVO_MAX_REGS > 0
constexpr int kRegCap = EVO_MAX_REGS < kMinBlocksRegs ? EVO_MAX_REGS : kMinBlocksRegs;
static_assert(kRegCap >= 24, "EVO_MAX_REGS too small to compile the kernel");
#define EVO_FWD_BOUNDS __maxnreg__(kRegCap > 255 ? 255 : kRegCap)
#else
#define EVO_FWD_BOUNDS __launch_bounds__(kThreads, EVO_MIN_BLOCKS)
#endif

// grid (ceil(Lq/BM), B*H, SPLIT_KV), block (WARPS+PRODUCER_WARPS)*32, smem EVO_SMEM_BYTES.
extern "C" __global__ void EVO_FWD_BOUNDS
evo_attention_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                  const elem_t* __restrict__ V, elem_t* __restrict__ O, float* __restrict__ ws_o,
                  float* __restrict__ ws_lse, int B, int H, int Lq_in, int Lk, int causal,
                  float scale, int Hkv, int diag, int win_left, int win_right
#if EVO_LSE
                  , float* __restrict__ lse
#endif
                  ) {
  // Packed (EVO_PACK_GQA): blockIdx.y is a K/V head, and its rows are the Lq queries of
  // each of its G query heads in turn; Lq below counts those rows.
  constexpr bool kPack = EVO_PACK_GQA != 0;
  const int Lq = kPack ? Lq_in * (H / Hkv) : Lq_in;
  extern __shared__ __align__(128) unsigned char smem[];
  elem_t* sQ = reinterpret_cast<elem_t*>(smem + kQOff);
  elem_t* sKV = reinterpret_cast<elem_t*>(smem + kKVOff);
  float* sM = reinterpret_cast<float*>(smem + kStatsOff);
  float* sL = sM + kBM;
  float* sAlpha = sM + 2 * kBM;
#if !EVO_P_REGS
  float* sS = reinterpret_cast<float*>(smem + kSOff);
  elem_t* sP = reinterpret_cast<elem_t*>(smem + kPOff);
#endif
#if !EVO_O_REGS
  float* sO = reinterpret_cast<float*>(smem + kOOff);
#endif

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bool consumer = kProducers == 0 || warp < kWarps;  // compile-time true without producers
  // Causal: the last query blocks see the most KV tiles; hand them out first
  // (blocks are dispatched in blockIdx order), so the long ones do not form
  // the tail of the grid.
  const int m0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kBM;
  const int bh = blockIdx.y;
  const int split = blockIdx.z;
  const Mask mk{Lk, causal, diag, win_left, win_right, kPack ? Lq_in : 0};
  const size_t kvh = kPack ? (size_t)bh : (size_t)kv_head_of(bh, H, Hkv);
  const elem_t* Qbh = Q + (size_t)bh * Lq * kD;
  const elem_t* Kbh = K + kvh * Lk * kD;
  const elem_t* Vbh = V + kvh * Lk * kD;
  const float sl = score_scale(scale);

  // ---- KV tile range of this CTA: the tiles its rows see (the mask skips the rest),
  // then this split's chunk of them. A row that sees no key gets zeros.
  const int2 seen = mk.tiles(m0, min(m0 + kBM, Lq) - 1, kBN);
  const int chunk = (seen.y - seen.x + kSplit - 1) / kSplit;
  const int t_begin = seen.x + split * chunk;
  const int t_end = min(t_begin + chunk, seen.y);
  const int nt = max(t_end - t_begin, 0);

  // ---- loaders: the producer warps if any, else every thread.
  const bool loader = kProducers > 0 ? !consumer : true;
  const int ltid = kProducers > 0 ? tid - kConsumerThreads : tid;

  // ---- Q once, by everyone. With cp.async and no producer warps every thread
  // is a loader, so Q goes out as its own cp.async group ahead of the K/V
  // prologue (its latency overlaps theirs; waiting for tile 0 implies it).
  // Otherwise Q is loaded with plain loads after the K/V prologue is issued.
  // Q is visible after the first barrier of the loop (or the one below).
  // (On a register path too full to hold Q's fragments, the plain load keeps
  // ptxas from spilling: measured at 255 registers, D128 BM128/4 warps.)
#if EVO_P_REGS
  constexpr bool kQAsync = EVO_CP_ASYNC && kProducers == 0 && kHoldQ;
#else
  constexpr bool kQAsync = EVO_CP_ASYNC && kProducers == 0;
#endif
  if (kQAsync) {
    load_tile<kBM, true, kThreads>(sQ, Qbh, m0, Lq, tid);
    cp_async_commit();
  }

  // ---- running state: m = -inf, l = 0, O = 0.
  const int ctid = tid;  // compute threads are warps 0..WARPS-1
#if EVO_P_REGS
  float m_r[kSlices][2], l_r[kSlices][2];
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    m_r[s][0] = m_r[s][1] = neg_inf();
    l_r[s][0] = l_r[s][1] = 0.0f;
  }
#endif
#if EVO_O_REGS && EVO_PV_MATH == 2
  float o_r[kSlices][kD / 8][4];
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) o_r[s][dt][0] = o_r[s][dt][1] = o_r[s][dt][2] = o_r[s][dt][3] = 0.0f;
#elif EVO_O_REGS  // scalar P.V
  float o_r[kPairsPerThread][2];
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) o_r[k][0] = o_r[k][1] = 0.0f;
#endif
#if EVO_P_REGS
  unsigned q_f[kSlices][kQFrags][4];
#endif
  if (consumer) {
    for (int r = ctid; r < kBM; r += kConsumerThreads) {
      sM[r] = neg_inf();
      sL[r] = 0.0f;
      sAlpha[r] = 1.0f;
    }
#if !EVO_O_REGS
    for (int e = ctid; e < kBM * kOPitch; e += kConsumerThreads) sO[e] = 0.0f;
#endif
  }

  // ---- one tile of compute on stage `st` (consumers only).
  auto compute = [&](int st, int tile) {
    const elem_t* sK = k_tile(sKV, st);
    const elem_t* sV = v_tile(sKV, st);
    const int n0 = tile * kBN;
#if EVO_P_REGS
#if EVO_O_REGS
    tile_regs(sQ, q_f, sK, sV, m_r, l_r, o_r, warp, lane, m0, n0, mk, sl);
#else
    tile_regs(sQ, q_f, sK, sV, m_r, l_r, sO, warp, lane, m0, n0, mk, sl);
#endif
#else
    qk_to_smem(sQ, sK, sS, ctid, warp, lane);
    consumer_sync();  // S complete
#if EVO_O_REGS
    softmax_smem(sS, sP, sM, sL, sAlpha, nullptr, warp, lane, m0, n0, mk, sl);
#else
    softmax_smem(sS, sP, sM, sL, sAlpha, sO, warp, lane, m0, n0, mk, sl);
#endif
    consumer_sync();  // P, alpha (and wmma's rescaled O) complete
#if EVO_PV_MATH == 0 && EVO_O_REGS
    pv_scalar_regs(sP, sV, sAlpha, o_r, ctid);
#elif EVO_PV_MATH == 0
    pv_scalar_smem(sP, sV, sAlpha, sO, ctid);
#elif EVO_PV_MATH == 1
    pv_wmma(sP, sV, sO, warp);
#elif EVO_O_REGS
    pv_mma_smemp_regso(sP, sV, sAlpha, o_r, warp, lane);
#else
    pv_mma_smemp_smemo(sP, sV, sAlpha, sO, warp, lane);
#endif
    // Reuse of S, P, alpha and O by the next tile is ordered by the loop's
    // block-wide barrier plus the consumer barrier after the next Q K^T.
#endif
  };

  // ---- the K/V pipeline (one protocol for cp.async and direct loads).
  // Per tile t: loaders wait for tile t; barrier (tile t visible to all, every
  // consumer done with tile t-1); loaders issue tile t+S-1 into the stage tile
  // t-1 used; consumers compute tile t. Groups are committed even when empty so
  // wait_group's count stays aligned with tile numbers.
#if EVO_STAGES > 1
  if (loader) {
#pragma unroll
    for (int p = 0; p < kStages - 1; ++p) {
      if (p < nt) issue_kv(sKV, p, Kbh, Vbh, t_begin + p, Lk, ltid);
      cp_async_commit();
    }
  }
#endif
  if (!kQAsync) load_tile<kBM, false, kThreads>(sQ, Qbh, m0, Lq, tid);
#if EVO_P_REGS
  if constexpr (kHoldQ) {
    // Q's group is the oldest: at most STAGES-1 K/V groups may still be in flight.
    if (nt > 0) {
      if (kQAsync) cp_async_wait<kStages - 1>();
      __syncthreads();
      if (consumer) {
        const int wrow0 = warp * kSlices * 16;
#pragma unroll
        for (int s = 0; s < kSlices; ++s)
#pragma unroll
          for (int kk = 0; kk < kD / 16; ++kk)
            ldmatrix_x4(q_f[s][kk], sQ + tile_off(wrow0 + s * 16 + lm_row_a(lane), kk * 16 + lm_col_a(lane)));
      }
    }
  }
#endif
#if EVO_STAGES > 1
  for (int t = 0; t < nt; ++t) {
    if (loader) cp_async_wait<kStages - 2>();
    __syncthreads();
    if (loader) {
      const int nxt = t + kStages - 1;
      if (nxt < nt) issue_kv(sKV, nxt % kStages, Kbh, Vbh, t_begin + nxt, Lk, ltid);
      cp_async_commit();
    }
    if (consumer) compute(t % kStages, t_begin + t);
  }
#else
  // One stage: no overlap. Barrier (done with t-1), load t, wait, barrier, compute.
  for (int t = 0; t < nt; ++t) {
    __syncthreads();
    if (loader) {
      issue_kv(sKV, 0, Kbh, Vbh, t_begin + t, Lk, ltid);
      cp_async_commit();
      cp_async_wait<0>();
    }
    __syncthreads();
    if (consumer) compute(0, t_begin + t);
  }
#endif
  // No cp.async may still be writing shared memory when the block exits (an
  // empty split chunk never waited for Q's group).
  if (kQAsync) cp_async_wait<0>();

  // ---- epilogue (consumers only; producers are done).
  if (!consumer) return;
  Out out;
  out.O = O;
  out.ws_o = ws_o;
  out.ws_lse = ws_lse;
#if EVO_LSE
  out.lse = lse;
#endif
  out.row_base = ((size_t)split * gridDim.y + bh) * (size_t)Lq;
  if (kSplit == 1) out.row_base = (size_t)bh * Lq;
  out.m0 = m0;
  out.Lq = Lq;

#if EVO_P_REGS
  // Finish the per-lane partial sums: a row's l is spread over its quad.
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l_r[s][h] += __shfl_xor_sync(0xffffffffu, l_r[s][h], 1);
      l_r[s][h] += __shfl_xor_sync(0xffffffffu, l_r[s][h], 2);
    }
#if EVO_O_REGS
  epilogue_frags(out, o_r, m_r, l_r, warp, lane);
#else
  // Publish m, l to the stats region, then the generic smem epilogue.
  {
    const int g = lane >> 2, t = lane & 3;
    if (t == 0) {
#pragma unroll
      for (int s = 0; s < kSlices; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = warp * kSlices * 16 + s * 16 + g + 8 * h;
          sM[r] = m_r[s][h];
          sL[r] = l_r[s][h];
        }
    }
  }
  consumer_sync();
  epilogue_smem(out, sO, sM, sL, ctid);
#endif
#else  // smem P path: m, l live in the stats region
  consumer_sync();
#if !EVO_O_REGS
  epilogue_smem(out, sO, sM, sL, ctid);
#elif EVO_PV_MATH == 2
  {
    const int g = lane >> 2;
    float m_f[kSlices][2], l_f[kSlices][2];
#pragma unroll
    for (int s = 0; s < kSlices; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * kSlices * 16 + s * 16 + g + 8 * h;
        m_f[s][h] = sM[r];
        l_f[s][h] = sL[r];
      }
    epilogue_frags(out, o_r, m_f, l_f, warp, lane);
  }
#else  // scalar P.V, O pairs in registers
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    const int p = ctid + k * kConsumerThreads;
    const int r = p / (kD / 2), c = (p % (kD / 2)) * 2;
    if (m0 + r < Lq) {
      const float inv = inv_or_zero(sL[r]);
      store_pair(out, r, c, o_r[k][0] * inv, o_r[k][1] * inv);
    }
  }
  for (int r = ctid; r < kBM; r += kConsumerThreads)
    if (m0 + r < Lq) store_lse(out, r, sM[r], sL[r]);
#endif
#endif
}

// The split-KV combine, evo_attention_combine, is kernels/combine.cuh (appended by the host).
