// evo: the Hopper backward template, section 5 (the kernels): evo_attention_bwd (main)
// and evo_attention_bwd_dq. Appended by the host after kernels/attention_bwd_sm90.cu
// (sections 1-2), kernels/attention_bwd_common.cuh (section 3) and
// kernels/attention_bwd_sm90_wgmma.cuh (section 4), whose names it uses; NVRTC only.
//
// Accumulator layout (wgmma m64nN, per warpgroup): value 4j + 2i + e of a thread is row
// warp * 16 + lane / 4 + 8i, column 8j + 2 (lane % 4) + e. Consecutive pairs, packed to
// 16 bits, are the register A fragments of the next wgmma (FlashAttention's C -> A
// reuse): fragment [kk][r] = values 8kk + 2r, 8kk + 2r + 1.

namespace evo {

// Main's shared memory (offsets of section 1 from the 1024-aligned base) and mbarriers:
// kv_full (K and V landed), q_full / q_empty per stage of the Q/dO ring.
struct MainSmem {
  uint32_t base;
  __device__ uint32_t k() const { return base + kOffK; }
  __device__ uint32_t v() const { return base + kOffV; }
  __device__ uint32_t q(int s) const { return base + kOffQ + s * kTileQ; }
  __device__ uint32_t d_o(int s) const { return base + kOffDo + s * kTileQ; }
  __device__ uint32_t ds(int b) const { return base + kOffDs + b * kDsBytes; }
  __device__ uint32_t p(int b) const { return base + kOffP + b * kDsBytes; }  // P^T (split)
  __device__ uint32_t stats(int s) const { return base + kOffStats + s * 2 * kBM * 4; }
  // A consumer warpgroup's dQ staging slot (EVO_DQ_BULK): one unit, 64 x 64 floats.
  __device__ uint32_t dq_stage(int cw, int slot) const {
    return base + kOffDqStage + (cw * kDqSlots + slot) * kDqUnitBytes;
  }
  __device__ uint32_t kv_full() const { return base + kOffBars; }
  __device__ uint32_t q_full(int s) const { return base + kOffBars + 8 + 8 * s; }
  __device__ uint32_t q_empty(int s) const { return base + kOffBars + 8 + 8 * kStages + 8 * s; }
};

// S^T (or dP^T) = A B^T over D for a warpgroup's 64 keys: A = its rows of K (or V),
// B = its kSN rows of the Q (or dO) stage, both K-major; D/16 k-steps of 32 bytes, every
// 4 the next 64-column block. Issued and committed, not waited for.
__device__ __forceinline__ void issue_scores(float (&acc)[kSN / 2], uint32_t a_wg, uint32_t b) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t blk = kk / 4, step = (kk % 4) * 32;
    const uint64_t da = make_desc(a_wg + blk * kBN * kRowBytes + step, 16, 1024);
    const uint64_t db = make_desc(b + blk * kBM * kRowBytes + step, 16, 1024);
    wgmma_ss<kSN>(acc, da, db, kk > 0);
  }
  wgmma_commit();
}

// acc += frag B over the stage's kBM rows: B (Q or dO) read transposed, N = kDs.
__device__ __forceinline__ void issue_grad(float (&acc)[kDsW / 2],
                                           const uint32_t (&a)[kSN / 16][4], uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < kSN / 16; ++kk) {
    const uint64_t db = make_desc(b + kk * 16 * kRowBytes, kBM * kRowBytes, 1024);
    wgmma_rs<kDsW>(acc, a[kk], db, 1);
  }
}

// The same with A (P^T or dS^T, the pair's whole step) from shared memory, K-major
// ([query block][key][64 queries], `a` at this warpgroup's first key), and B's kDsW
// columns from `b` (EVO_DKV_COLUMNS).
__device__ __forceinline__ void issue_grad_ss(float (&acc)[kDsW / 2], uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < kBM / 16; ++kk) {
    const uint32_t blk = kk / 4, step = (kk % 4) * 32;
    const uint64_t da = make_desc(a + blk * kBN * kRowBytes + step, 16, 1024);
    const uint64_t db = make_desc(b + kk * 16 * kRowBytes, kBM * kRowBytes, 1024);
    wgmma_ss_bt<kDsW>(acc, da, db, 1);
  }
}

}  // namespace evo

// grid (ceil(Lk / BLOCK_N), B*Hkv), block 128 * (EVO_CONSUMER_WGS + 1), dynamic smem
// EVO_SMEM_BYTES. Warpgroup 0 produces, warpgroup 1 + w owns keys n0 + 64 (w / kSplit)
// .. + 63 (and, split, the columns of half w % kSplit).
extern "C" __global__ void __launch_bounds__(evo::kThreads, 1)
    evo_attention_bwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                      const elem_t* __restrict__ V, const elem_t* __restrict__ O,
                      const elem_t* __restrict__ dO, const float* __restrict__ lse,
                      elem_t* __restrict__ dQ, elem_t* __restrict__ dK, elem_t* __restrict__ dV,
                      float* __restrict__ ws, int B, int H, int Lq, int Lk, int causal,
                      float scale, int Hkv, int diag, int window_left, int window_right) {
  using namespace evo;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  const unsigned char* gbase = smem_raw + (base - raw);  // the same bytes, generic
  const MainSmem sm{base};

  const int n0 = blockIdx.x * kBN;
  const int kvh = blockIdx.y;  // b * Hkv + K/V head
  const int group = H / Hkv;
  const int bh0 = (kvh / Hkv) * H + (kvh % Hkv) * group;  // the group's first query head
  const Mask mk{Lk, causal, diag, window_left, window_right, 0};
  const float* dpsum = dpsum_of(ws, B, H, Lq);

  // The work: query blocks [mb0, mb0 + nmb) of each of the group's query heads.
  const int2 rows = queries_of_keys(mk, Lq, n0, min(n0 + kBN, Lk));
  const int mb0 = rows.x / kBM;
  const int nmb = rows.x <= rows.y ? rows.y / kBM - mb0 + 1 : 0;
  const int items = nmb * group;
  // Each head's query blocks in a rotated order, the rotation spread over the CTAs of
  // the K/V head, so that CTAs that start together add into different dQ rows. It
  // measured neutral (kernels/NOTES.md §18: the adds cost L2 throughput, not
  // contention on the same rows); it costs nothing either.
  const int rot = (EVO_BENCH_SKIP & 8) || nmb == 0
                      ? 0
                      : (int)((long long)blockIdx.x * nmb / gridDim.x);
  auto item_bh = [&](int it) { return bh0 + it / nmb; };
  auto item_m0 = [&](int it) {
    const int r = it % nmb + rot;
    return (mb0 + (r >= nmb ? r - nmb : r)) * kBM;
  };

  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full(), 128);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(sm.q_full(s), 128);         // the producer's threads
      mbar_init(sm.q_empty(s), kWgs * 128);  // one arrival per consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int wg = __shfl_sync(0xffffffff, threadIdx.x / 128, 0);
  if (wg == 0) {
    // ---------------------------------------------------------------- producer
    if (kProducerRegs) setmaxnreg_dec<kProducerRegs ? kProducerRegs : 24>();
    const int tid = threadIdx.x;
    copy_tile<kBN>(sm.k(), K + (size_t)kvh * Lk * kD, n0, Lk, tid);
    copy_tile<kBN>(sm.v(), V + (size_t)kvh * Lk * kD, n0, Lk, tid);
    // Each stage (and K/V) completes when every producer thread's copies into it have
    // landed: each thread arrives by cp.async.mbarrier.arrive.noinc (the barriers count
    // 128 arrivals), so nothing waits on the next stage's issue (kernels/NOTES.md §18).
    cp_async_mbar_arrive(sm.kv_full());
    for (int i = 0; i < items; ++i) {
      const int s = i % kStages;
      mbar_wait(sm.q_empty(s), ((i / kStages) & 1) ^ 1);
      const int bh = item_bh(i), m0 = item_m0(i);
      if (!(EVO_BENCH_SKIP & 4) || i < kStages) {
        copy_tile<kBM>(sm.q(s), Q + (size_t)bh * Lq * kD, m0, Lq, tid);
        copy_tile<kBM>(sm.d_o(s), dO + (size_t)bh * Lq * kD, m0, Lq, tid);
        copy_vec<kBM>(sm.stats(s), lse + (size_t)bh * Lq, m0, Lq, tid);
        copy_vec<kBM>(sm.stats(s) + kBM * 4, dpsum + (size_t)bh * Lq, m0, Lq, tid);
      }
      cp_async_mbar_arrive(sm.q_full(s));
    }
    return;
  }

  // ------------------------------------------------------------------ consumers
  if (kProducerRegs) setmaxnreg_inc<kProducerRegs ? kConsumerRegs : 240>();
  const int cw = wg - 1;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, quad = lane % 4;
  const int kg = cw / kSplit, part = cw % kSplit;  // its 64 keys; its half (split)
  const int key_row = kg * 64 + warp * 16 + lane / 4;  // + 8i: this thread's keys in the tile
  const int q_off = part * kSN;  // its query columns of S^T and dP^T in the step
  const int c_off = part * kDsW;  // its columns of dK and dV
  const float sl = scale * kLog2e;
  float* const dq_acc = dq_accumulator(ws);

  float dv[kDsW / 2], dk[kDsW / 2];
#pragma unroll
  for (int x = 0; x < kDsW / 2; ++x) dv[x] = dk[x] = 0.0f;

  // The copies landed by cp.async (the generic proxy); wgmma reads them (the async one).
  if (items > 0) mbar_wait(sm.kv_full(), 0);
  fence_async_proxy();
  const uint32_t k_wg = sm.k() + kg * 64 * kRowBytes, v_wg = sm.v() + kg * 64 * kRowBytes;
  // B of dV and dK: the stage's 64-column blocks of this warpgroup's columns.
  const uint32_t grad_cols = (c_off / 64) * kBM * kRowBytes;
  for (int i = 0; i < items; ++i) {
    const int s = i % kStages;
    const int bh = item_bh(i), m0 = item_m0(i);
    mbar_wait(sm.q_full(s), (i / kStages) & 1);
    fence_async_proxy();
    const uint32_t sq = sm.q(s), sdo = sm.d_o(s);
    const float* const s_lse =
        reinterpret_cast<const float*>(gbase + (sm.stats(s) - base)) + q_off;
    const float* const s_dps = s_lse + kBM;

    // S^T = K Q^T and dP^T = V dO^T over this warpgroup's kSN query rows, two groups.
    float st[kSN / 2], dpt[kSN / 2];
    issue_scores(st, k_wg, sq + q_off * kRowBytes);
    issue_scores(dpt, v_wg, sdo + q_off * kRowBytes);
    wgmma_wait<1>();
#pragma unroll
    for (int x = 0; x < kSN / 2; ++x) keep(st[x]);

    // P^T = exp(S^T * scale - lse), column (query) by column; 0 where masked. Query rows
    // past Lq carry zero Q, dO, lse and dpsum: their P is finite and adds nothing.
    const bool need_mask = !mk.clear(m0, min(m0 + kBM, Lq) - 1, n0, kBN);
#pragma unroll
    for (int j = 0; j < kSN / 8; ++j) {
      const int q = 8 * j + 2 * quad;
      const float2 l2 = *reinterpret_cast<const float2*>(s_lse + q);
      const float la = l2.x * kLog2e, lb = l2.y * kLog2e;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float p0 = score_exp(fmaf(st[4 * j + 2 * h], sl, -la));
        float p1 = score_exp(fmaf(st[4 * j + 2 * h + 1], sl, -lb));
        if (need_mask) {
          const int key = n0 + key_row + 8 * h;
          if (mk.masked(m0 + q_off + q, key)) p0 = 0.0f;
          if (mk.masked(m0 + q_off + q + 1, key)) p1 = 0.0f;
        }
        st[4 * j + 2 * h] = p0;
        st[4 * j + 2 * h + 1] = p1;
      }
    }
    uint32_t pt[kSN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kSN / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pt[kk][r] = pack2(st[8 * kk + 2 * r], st[8 * kk + 2 * r + 1]);

    // dS^T = P^T (dP^T - dpsum).
    wgmma_wait<0>();
#pragma unroll
    for (int x = 0; x < kSN / 2; ++x) keep(dpt[x]);
    uint32_t dst[kSN / 16][4];
#pragma unroll
    for (int j = 0; j < kSN / 8; ++j) {
      const float2 d2 = *reinterpret_cast<const float2*>(s_dps + 8 * j + 2 * quad);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float a = st[4 * j + 2 * h] * (dpt[4 * j + 2 * h] - d2.x);
        const float b = st[4 * j + 2 * h + 1] * (dpt[4 * j + 2 * h + 1] - d2.y);
        dst[j / 2][(j % 2) * 2 + h] = pack2(a, b);
      }
    }

    // dV += P^T dO, dK += dS^T Q (scaled once at the end). With the bulk dQ adds, dK is
    // issued after this warpgroup's first dQ unit, so that it runs on the tensor cores
    // while that unit is staged and added (FlashAttention-3's order). With the red adds
    // that order measured slower (the adds and dK contend: B2 H16 L4096 D128 2.11 ms
    // against 1.94, experiments/2026-11-27-h100-bwd-bulk run b2) and spills at D64
    // BLOCK_M 128, so dK goes with dV there. Split (EVO_DKV_COLUMNS), both wait for the
    // pair's P^T and dS^T in shared memory, after the barrier below.
    const uint32_t ds_buf = sm.ds(i & 1), p_buf = sm.p(i & 1);
    const uint32_t a_keys = kg * 64 * kRowBytes;  // this warpgroup's keys in dS^T, P^T
    auto issue_dk = [&]() {
      if constexpr (kPSmem)
        issue_grad_ss(dk, ds_buf + a_keys, sq + grad_cols);
      else
        issue_grad(dk, dst, sq + grad_cols);
    };
    if constexpr (!kPSmem) {
      wgmma_fence();
      issue_grad(dv, pt, sdo + grad_cols);
      if constexpr (!kDkLate) issue_dk();
      wgmma_commit();
    }

    if constexpr (kDsSmem) {
      // dS^T (and, split, P^T) to shared memory ([query block][key][64 queries],
      // swizzled), then the consumers' barrier. The two buffers alternate: a warpgroup
      // writes buffer i % 2 only after the barrier of item i - 1, which every warpgroup
      // reaches after its wgmmas of item i - 2 (dQ; dV and dK split) have completed.
#pragma unroll
      for (int j = 0; j < kSN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t at = swz(kBN, key_row + 8 * h, q_off + 8 * j + 2 * quad);
          asm volatile("st.shared.u32 [%0], %1;" ::"r"(ds_buf + at),
                       "r"(dst[j / 2][(j % 2) * 2 + h])
                       : "memory");
          if constexpr (kPSmem)
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(p_buf + at),
                         "r"(pt[j / 2][(j % 2) * 2 + h])
                         : "memory");
        }
      fence_async_proxy();
      // With the bulk adds, this warpgroup's last item's adds have read its staging.
      if (kDqBulk && tid == 0) bulk_wait_read<0>();
      named_sync(1, kWgs * 128);
    }
    if constexpr (kPSmem) {
      wgmma_fence();
      issue_grad_ss(dv, p_buf + a_keys, sdo + grad_cols);
      if constexpr (!kDkLate) issue_dk();
      wgmma_commit();
    }

    if constexpr (kDqHere) {
      // Every consumer's share of dQ = dS K.
      // Units of 64 query rows x 64 columns, round robin over the warpgroups: A = dS
      // read transposed from dS^T, B = K read transposed, k-steps over the kBN keys.
      // This warpgroup's unit u, its slot-th.
      auto dq_unit = [&](const int u, const int slot) {
        const int ms = u / kColBlocks, ns = u % kColBlocks;
        float dq[32];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) {
          const uint64_t da = make_desc(ds_buf + ms * kBN * kRowBytes + kk * 16 * kRowBytes,
                                        kBN * kRowBytes, 1024);
          const uint64_t db = make_desc(sm.k() + ns * kBN * kRowBytes + kk * 16 * kRowBytes,
                                        kBN * kRowBytes, 1024);
          wgmma_ss_t<64>(dq, da, db, kk > 0);
        }
        wgmma_commit();
        if (kDkLate && slot == 0) {
          issue_dk();
          wgmma_commit();
          wgmma_wait<1>();  // dV and this unit; dK goes on
        } else {
          wgmma_wait<0>();
        }
#pragma unroll
        for (int x = 0; x < 32; ++x) keep(dq[x]);
        const int row0 = m0 + ms * 64 + warp * 16;  // this warp's 16 rows
        const int col0 = ns * 64;
        float* const acc_head = dq_acc + (size_t)bh * Lq * kD;
        if constexpr (EVO_BENCH_SKIP & 1) {
        } else if constexpr (kDqBulk) {
          // The unit into its slot in the accumulator's layout (dq_acc_at: rows of the
          // unit's width, 32-byte chunks XOR-swizzled by the row), then one bulk add of
          // its rows below Lq. The XOR puts a warp's 8 rows on distinct bank groups.
          const uint32_t stage = sm.dq_stage(cw, slot);
          constexpr int kLastW = kD - (kColBlocks - 1) * 64;  // the last block's columns
          const int w = ns == kColBlocks - 1 ? kLastW : 64;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int rr = warp * 16 + lane / 4 + 8 * h;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              if (8 * j >= w) continue;
              const int at = dq_unit_at(rr, j, 2 * quad, w);
              asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(stage + at * 4),
                           "f"(dq[4 * j + 2 * h]), "f"(dq[4 * j + 2 * h + 1])
                           : "memory");
            }
          }
          fence_async_proxy();
          named_sync(2 + cw, 128);
          const int unit_row = m0 + ms * 64, rows_in = min(64, Lq - unit_row);
          if (tid == 0 && rows_in > 0) {
            bulk_reduce_add(acc_head + (size_t)unit_row * kD + col0 * rows_in, stage,
                            rows_in * w * 4);
            bulk_commit();
          }
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int q = row0 + lane / 4 + 8 * h;
            if (q >= Lq) continue;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              const int c = col0 + 8 * j + 2 * quad;
              if (c < kD)
                atomicAdd(reinterpret_cast<float2*>(acc_head + (size_t)q * kD + c),
                          make_float2(dq[4 * j + 2 * h], dq[4 * j + 2 * h + 1]));
            }
          }
        }
      };
      if constexpr (kDkLate) {
        // Unrolled, so that which unit issues dK is known to ptxas (a runtime choice
        // serialises the wgmmas for want of registers at D96 and D128).
#pragma unroll
        for (int slot = 0; slot < kDqSlots; ++slot) {
          if (cw + slot * kWgs >= kDqUnits) break;
          dq_unit(cw + slot * kWgs, slot);
        }
      } else {
        // Not unrolled: unrolled, the red adds' addressing spills at D64 BLOCK_M 128.
        for (int u = cw, slot = 0; u < kDqUnits; u += kWgs, ++slot) dq_unit(u, slot);
      }
      if (kDkLate && cw >= kDqUnits) {  // a warpgroup without a dQ unit
        wgmma_fence();
        issue_dk();
        wgmma_commit();
      }
    }
    wgmma_wait<0>();  // dK (and dV when no dQ unit waited already)
#pragma unroll
    for (int x = 0; x < kDsW / 2; ++x) {
      keep(dv[x]);
      keep(dk[x]);
    }
    if constexpr (!kPSmem) {
#pragma unroll
      for (int kk = 0; kk < kSN / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          keep(pt[kk][r]);
          keep(dst[kk][r]);
        }
    }
    // This thread is done with the stage (Q, dO, lse, dpsum). Every thread arrives,
    // since each read lse and dpsum with ld.shared: one arrival per warp after a
    // __syncwarp orders them as well, but compute-sanitizer's racecheck does not follow
    // that order and reported the producer's next fill of lse and dpsum as racing with
    // those reads (experiments/2026-11-27-h100-bwd-bulk, runs t1 and t3).
    mbar_arrive(sm.q_empty(s));
  }

  // dK = scale * sum dS^T Q, dV = sum P^T dO; keys no query sees get zeros.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = n0 + key_row + 8 * h;
    if (key >= Lk) continue;
    const size_t row = ((size_t)kvh * Lk + key) * kD + c_off + 2 * quad;
#pragma unroll
    for (int j = 0; j < kDsW / 8; ++j) {
      if (c_off + 8 * j >= kD) break;  // D96's pad columns
      *reinterpret_cast<elem2_t*>(dK + row + 8 * j) =
          from_float2(dk[4 * j + 2 * h] * scale, dk[4 * j + 2 * h + 1] * scale);
      *reinterpret_cast<elem2_t*>(dV + row + 8 * j) =
          from_float2(dv[4 * j + 2 * h], dv[4 * j + 2 * h + 1]);
    }
  }
  // The bulk adds are complete before the CTA (and its shared memory) ends.
  if (kDqBulk && tid == 0) bulk_wait();
}

// grid (ceil(Lq / (64 * EVO_CONSUMER_WGS)), B*H), block 128 * (EVO_CONSUMER_WGS + 1),
// dynamic smem EVO_DQ_SMEM_BYTES (only with EVO_DQ_SEPARATE; an empty kernel otherwise).
// The forward's shape: warpgroup 1 + w owns 64 query rows, Q and dO stay in shared
// memory, the producer streams the K/V tiles of 64 keys they see through a ring:
// S = Q K^T, dP = dO V^T, P and dS in registers, dQ += dS K with dS as the register A
// operand. No atomics: dQ is written once, so the backward is bitwise repeatable.
extern "C" __global__ void __launch_bounds__(evo::kThreads, 1)
    evo_attention_bwd_dq(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                         const elem_t* __restrict__ V, const elem_t* __restrict__ O,
                         const elem_t* __restrict__ dO, const float* __restrict__ lse,
                         elem_t* __restrict__ dQ, elem_t* __restrict__ dK,
                         elem_t* __restrict__ dV, float* __restrict__ ws, int B, int H, int Lq,
                         int Lk, int causal, float scale, int Hkv, int diag, int window_left,
                         int window_right) {
#if EVO_DQ_SEPARATE
  using namespace evo;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  const unsigned char* gbase = smem_raw + (base - raw);
  const uint32_t s_q = base + kDqOffQ, s_do = base + kDqOffDo, s_stats = base + kDqOffStats;
  auto s_k = [&](int s) { return base + kDqOffK + s * kDqTileK; };
  auto s_v = [&](int s) { return base + kDqOffV + s * kDqTileK; };
  const uint32_t q_full = base + kDqOffBars;
  auto kv_full = [&](int s) { return base + kDqOffBars + 8 + 8 * s; };
  auto kv_empty = [&](int s) { return base + kDqOffBars + 8 + 8 * kStages + 8 * s; };

  // Causal: the last query blocks see the most tiles; hand them out first.
  const int m0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kDqBM;
  const int bh = blockIdx.y;
  const size_t kvh = kv_head_of(bh, H, Hkv);
  const Mask mk{Lk, causal, diag, window_left, window_right, 0};
  const int2 seen = mk.tiles(m0, min(m0 + kDqBM, Lq) - 1, kDqBN);
  const int tiles = seen.y - seen.x;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 128);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(kv_full(s), 128);
      mbar_init(kv_empty(s), kWgs * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int wg = __shfl_sync(0xffffffff, threadIdx.x / 128, 0);
  if (wg == 0) {
    if (kProducerRegs) setmaxnreg_dec<kProducerRegs ? kProducerRegs : 24>();
    const int tid = threadIdx.x;
    copy_tile<kDqBM>(s_q, Q + (size_t)bh * Lq * kD, m0, Lq, tid);
    copy_tile<kDqBM>(s_do, dO + (size_t)bh * Lq * kD, m0, Lq, tid);
    copy_vec<kDqBM>(s_stats, lse + (size_t)bh * Lq, m0, Lq, tid);
    copy_vec<kDqBM>(s_stats + kDqBM * 4, dpsum_of(ws, B, H, Lq) + (size_t)bh * Lq, m0, Lq, tid);
    cp_async_commit();
    cp_async_wait<0>();
    fence_async_proxy();
    mbar_arrive(q_full);
    for (int t = 0; t < tiles; ++t) {
      const int s = t % kStages;
      mbar_wait(kv_empty(s), ((t / kStages) & 1) ^ 1);
      const int n0 = (seen.x + t) * kDqBN;
      copy_tile<kDqBN>(s_k(s), K + kvh * Lk * kD, n0, Lk, tid);
      copy_tile<kDqBN>(s_v(s), V + kvh * Lk * kD, n0, Lk, tid);
      cp_async_commit();
      cp_async_wait<0>();
      fence_async_proxy();
      mbar_arrive(kv_full(s));
    }
    return;
  }

  if (kProducerRegs) setmaxnreg_inc<kProducerRegs ? kConsumerRegs : 240>();
  const int cw = wg - 1;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, quad = lane % 4;
  const int row = cw * 64 + warp * 16 + lane / 4;  // + 8i: this thread's rows in the block
  const float sl = scale * kLog2e;
  const float* const f_stats = reinterpret_cast<const float*>(gbase + (s_stats - base));
  float ll[2], dps[2];
  mbar_wait(q_full, 0);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    ll[h] = f_stats[row + 8 * h] * kLog2e;
    dps[h] = f_stats[kDqBM + row + 8 * h];
  }
  float dq[kDs / 2];
#pragma unroll
  for (int x = 0; x < kDs / 2; ++x) dq[x] = 0.0f;
  const uint32_t q_wg = s_q + cw * 64 * kRowBytes, do_wg = s_do + cw * 64 * kRowBytes;

  for (int t = 0; t < tiles; ++t) {
    const int s = t % kStages;
    const int n0 = (seen.x + t) * kDqBN;
    mbar_wait(kv_full(s), (t / kStages) & 1);
    float sc[kDqBN / 2], dp[kDqBN / 2];
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t blk = kk / 4, step = (kk % 4) * 32;
        const uint64_t da =
            make_desc((pass ? do_wg : q_wg) + blk * kDqBM * kRowBytes + step, 16, 1024);
        const uint64_t db =
            make_desc((pass ? s_v(s) : s_k(s)) + blk * kDqBN * kRowBytes + step, 16, 1024);
        wgmma_ss<kDqBN>(pass ? dp : sc, da, db, kk > 0);
      }
      wgmma_commit();
    }
    wgmma_wait<1>();
#pragma unroll
    for (int x = 0; x < kDqBN / 2; ++x) keep(sc[x]);
    const bool need_mask = !mk.clear(m0, min(m0 + kDqBM, Lq) - 1, n0, kDqBN);
#pragma unroll
    for (int j = 0; j < kDqBN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float p = score_exp(fmaf(sc[4 * j + 2 * h + e], sl, -ll[h]));
          if (need_mask && mk.masked(m0 + row + 8 * h, n0 + 8 * j + 2 * quad + e)) p = 0.0f;
          sc[4 * j + 2 * h + e] = p;
        }
    wgmma_wait<0>();
#pragma unroll
    for (int x = 0; x < kDqBN / 2; ++x) keep(dp[x]);
    uint32_t ds[kDqBN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kDqBN / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int x = 8 * kk + 2 * r, h = r % 2;
        ds[kk][r] = pack2(sc[x] * (dp[x] - dps[h]), sc[x + 1] * (dp[x + 1] - dps[h]));
      }
    // dQ += dS K: K read transposed (N = kDs), k-steps over the tile's keys.
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDqBN / 16; ++kk) {
      const uint64_t db = make_desc(s_k(s) + kk * 16 * kRowBytes, kDqBN * kRowBytes, 1024);
      wgmma_rs<kDs>(dq, ds[kk], db, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int x = 0; x < kDs / 2; ++x) keep(dq[x]);
#pragma unroll
    for (int kk = 0; kk < kDqBN / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) keep(ds[kk][r]);
    __syncwarp();
    if (lane == 0) mbar_arrive(kv_empty(s));
  }

  // dQ = scale * sum dS K; a row that sees no key gets zeros.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int q = m0 + row + 8 * h;
    if (q >= Lq) continue;
    elem_t* out = dQ + ((size_t)bh * Lq + q) * kD + 2 * quad;
#pragma unroll
    for (int j = 0; j < kD / 8; ++j)
      *reinterpret_cast<elem2_t*>(out + 8 * j) =
          from_float2(dq[4 * j + 2 * h] * scale, dq[4 * j + 2 * h + 1] * scale);
  }
#endif
}
