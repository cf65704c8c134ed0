// evo: the Hopper template, sections 4-6 (the roles): what the producer, the consumer
// warpgroups and the tile scheduler of kernels/attention_sm90_kernel.cuh do. Appended by
// the host after kernels/attention_sm90.cu (sections 1-3: the configuration, the PTX
// wrappers, wgmma), whose names it uses; NVRTC only.

namespace evo {

// ============================================================ 4. the producer

// Copies rows [row0, row0 + rows) of one head's [L, D] matrix into the swizzled
// layout at `dst` with the producer warpgroup's 128 threads (the non-TMA loads);
// rows at or past L are zero-filled.
template <int kRows>
__device__ __forceinline__ void copy_tile(uint32_t dst, const elem_t* head, int row0, int L) {
  constexpr int kChunks = kRows * kD / 8;  // 16-byte chunks
  const int tid = threadIdx.x;             // producer warpgroup: threads 0..127
#pragma unroll 4
  for (int c = tid; c < kChunks; c += 128) {
    const int row = c / (kD / 8), chunk = c % (kD / 8);
    const int block = chunk / 8, in_row = chunk % 8;
    const uint32_t to = dst + block * kRows * kRowBytes + row * kRowBytes +
                        ((in_row ^ (row % 8)) * 16);
    const bool ok = row0 + row < L;
    const elem_t* src = head + (size_t)(ok ? row0 + row : 0) * kD + chunk * 8;
    if (kLoad == kCpAsync) {
      cp_async16(to, src, ok);
    } else {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (ok) v = *reinterpret_cast<const uint4*>(src);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(to), "r"(v.x), "r"(v.y),
                   "r"(v.z), "r"(v.w)
                   : "memory");
    }
  }
}

// D96 (kDs > kD): zeroes the pad columns kD..kDs-1 of one [rows][kDs] tile, which sit
// in its last column block, with all of the CTA's threads. The cp.async and plain-load
// producers write only the real columns, so this runs once, before the first load;
// S = Q K^T never reads the pad, and P V's pad columns of O are never stored, but a
// zero pad keeps them finite (TMA zero-fills the pad itself).
__device__ __forceinline__ void zero_pad(uint32_t tile, int rows) {
  constexpr int kFirst = (kD % 64) / 8, kPer = 8 - kFirst;  // pad chunks of a row
  const uint32_t last = tile + (kColBlocks - 1) * rows * kRowBytes;
  for (int i = threadIdx.x; i < rows * kPer; i += kThreads) {
    const int r = i / kPer, chunk = kFirst + i % kPer;
    const uint32_t at = last + r * kRowBytes + ((chunk ^ (r % 8)) * 16);
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(at), "r"(0u) : "memory");
  }
}

// The threads' own copies are complete and visible to wgmma: then each arrives.
__device__ __forceinline__ void copies_landed(uint32_t bar) {
  if (kLoad == kCpAsync) asm volatile("cp.async.wait_all;" ::: "memory");
  fence_async_proxy();
  mbar_arrive(bar);
}

// The Q slot of a CTA's k-th tile and the parity of that slot's use.
__device__ __forceinline__ int q_slot(int k) { return kChained ? k & 1 : 0; }
__device__ __forceinline__ uint32_t q_parity(int k) { return kChained ? (k >> 1) & 1 : k & 1; }

struct Smem {
  uint32_t q, o, k0, v0, bars, exchange, keys;
  __device__ uint32_t k(int s) const { return k0 + s * kTileBytes; }
  __device__ uint32_t v(int s) const { return v0 + s * kTileBytes; }
  // Q is released once the tile's last S = Q K^T has completed: a persistent CTA's
  // producer then loads the next tile's Q. Chained, Q has two slots (the second one
  // where O's staging would be), used by a CTA's tiles in turn, each released after
  // its tile's epilogue; the second slot's barriers follow the stages'.
  __device__ uint32_t q_at(int slot) const { return q + slot * kQBytes; }
  __device__ uint32_t q_full(int slot) const { return slot ? bars + 8 * (2 + 4 * kStages) : bars; }
  __device__ uint32_t q_empty(int slot) const {
    return slot ? bars + 8 * (3 + 4 * kStages) : bars + 8;
  }
  __device__ uint32_t k_full(int s) const { return bars + 8 * (2 + s); }
  __device__ uint32_t v_full(int s) const { return bars + 8 * (2 + kStages + s); }
  // K and V of a stage are released separately: K once S = Q K^T has completed, V
  // once O += P V has, so the producer refills K while P V still reads V.
  __device__ uint32_t k_empty(int s) const { return bars + 8 * (2 + 2 * kStages + s); }
  __device__ uint32_t v_empty(int s) const { return bars + 8 * (2 + 3 * kStages + s); }
  // Cluster merge: consumer warpgroup c's exchange b (of kExchanges), and its mbarrier
  // (one arrival, with the bytes the other CTAs' stores complete).
  __device__ uint32_t exchange_of(int c, int b) const {
    return exchange + (c * kExchanges + b) * Exchange::kBytes;
  }
  __device__ uint32_t merged(int c, int b) const { return bars + 8 * (4 + 4 * kStages + 2 * c + b); }
};

// ============================================================ 5. the consumers

// One unit of work: a query block of one head, over one split of the keys. The block's
// rows are [row0, row_end) (section 6: balanced blocks, so they need not be kBM rows
// from a multiple of kBM); a consumer warpgroup whose 64 rows start at or past
// row_end has nothing to compute in it.
struct Work {
  int m_block, bh, split;
  int row0, row_end;
};

// A finished tile's rows and softmax statistics: what its epilogue reads (chained,
// the consumer has moved on to the next tile by then).
// The thread's rows follow from the warpgroup's first one; m is read by a split's
// epilogue and for the lse only.
struct Finished {
  int wg_row0;
  float m[2], l[2];
};

// The natural-log lse of a row from its maximum m (score units: log2 ones with EVO_EXP2)
// and its sum l: what a split leaves in ws_lse, -inf for a row that saw no key (weight 0
// in the combine).
__device__ __forceinline__ float row_lse(float m, float l) {
#if EVO_EXP2
  const float lse = m * 0.6931471805599453f + logf(l);
#else
  const float lse = m + logf(l);
#endif
  return l > 0.0f ? lse : neg_inf();
}

// A finished tile's rows' lse into the forward's `lse` (evo_lse, kernels/ABI.md), at
// `lse_bh` (its head's rows), by the first lane of each quad (l summed over the quad):
// +inf for a row that saw no key (FlashAttention's convention). Rows from `row_end` on
// are not the block's.
__device__ __forceinline__ void store_lse(float* lse_bh, const Finished& f, int row_end, int warp,
                                          int lane) {
  if (lane % 4 != 0) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = f.wg_row0 + warp * 16 + lane / 4 + 8 * i;
    if (rr < row_end) lse_bh[rr] = f.l[i] > 0.0f ? row_lse(f.m[i], f.l[i]) : __int_as_float(0x7f800000);
  }
}

// One consumer warpgroup's view of the tile: its rows, its lane, its running softmax.
struct Consumer {
  int cw;         // consumer warpgroup index: rows m0 + 64 cw .. + 63
  int lane, quad;
  int wg_row0;    // first query row of the warpgroup
  int row[2];     // the thread's two rows (wgmma accumulator layout)
  float m[2], l[2];
  float score_scale;
  Mask mk;
  // Starts a tile: its rows (query block m_block) and an empty softmax.
  __device__ void begin(const Work& w, int warp) {
    wg_row0 = w.row0 + (kWgKeys ? 0 : cw * 64);
    row[0] = wg_row0 + warp * 16 + lane / 4;
    row[1] = row[0] + 8;
    m[0] = m[1] = neg_inf();
    l[0] = l[1] = 0.0f;
  }
  __device__ Finished finish() const {
    return Finished{wg_row0, {m[0], m[1]}, {l[0], l[1]}};
  }
};

// S = Q K^T: D/16 k-steps; a step advances 32 bytes inside a 128-byte row, and every
// 4 steps move to the next 64-column block (D96: the last block's pad is never read).
// Issued, not waited for.
__device__ __forceinline__ void issue_qk(float (&sc)[kBN / 2], uint32_t q_wg, uint32_t k_stage) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t blk = kk / 4, step = (kk % 4) * 32;
    const uint64_t da = make_desc(q_wg + blk * kBM * kRowBytes + step, 16, 1024);
    const uint64_t db = make_desc(k_stage + blk * kBN * kRowBytes + step, 16, 1024);
    wgmma_ss<kBN>(sc, da, db, kk > 0);
  }
  wgmma_commit();
}

// O += P V: BN/16 k-steps of 16 V rows (2048 bytes); V is read transposed, N = kDs
// (D96: 128, the last 32 columns V's zero pad). With `acc` = 0, O = P V: O's registers
// are not read. Issued.
__device__ __forceinline__ void issue_pv(float (&o)[kDs / 2], uint32_t (&p)[kBN / 16][4],
                                         uint32_t v_stage, int acc = 1) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {
    const uint64_t db = make_desc(v_stage + kk * 16 * kRowBytes, kBN * kRowBytes, 1024);
    wgmma_rs<kDs>(o, p[kk], db, kk > 0 ? 1 : acc);
  }
  wgmma_commit();
}

// The exponentials are kernels/mma.cuh's: ex2_approx (one MUFU.EX2) and, with
// EVO_EXP_FMA, ex2_poly for every other column (2^x on the FMA pipe: the MUFU unit does
// 16 exponentials per clock per SM, as many as the tensor cores need at D64; half of
// them there runs beside).
#if EVO_EXP2
#define EVO_EXPF ex2_approx
#else
#define EVO_EXPF expf
#endif

// Masks the keys a row does not see (kernels/mask.cuh; only tiles that reach past Lk
// or past one of the warpgroup's rows' first or last key need it); then the online
// softmax of the
// thread's two rows: the scores become p = exp(s - m) in place and alpha, the factor
// O must be rescaled by, is returned. l stays a per-lane partial sum until the
// epilogue (the same alpha scales all 4 lanes of a row).
__device__ __forceinline__ void softmax(Consumer& c, float (&sc)[kBN / 2], int n0,
                                        float (&alpha)[2]) {
  if (!c.mk.clear(c.wg_row0, c.wg_row0 + 63, n0, kBN)) {
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = n0 + 8 * j + 2 * c.quad + e;
          if (c.mk.masked(c.row[i], col)) sc[4 * j + 2 * i + e] = neg_inf();
        }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = neg_inf();
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
      mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * i], sc[4 * j + 2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
    const float m_new = fmaxf(c.m[i], mx * c.score_scale);
    // A row that has seen only masked keys keeps m = -inf; exp(-inf - (-inf)) is NaN.
    const float m_use = m_new == neg_inf() ? 0.0f : m_new;
    alpha[i] = EVO_EXPF(c.m[i] - m_use);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = sc[4 * j + 2 * i + e];
        x = EVO_EXP_FMA && e == 1 ? ex2_poly(fmaf(x, c.score_scale, -m_use))
                                  : EVO_EXPF(fmaf(x, c.score_scale, -m_use));
        sum += x;
      }
    c.l[i] = c.l[i] * alpha[i] + sum;
    c.m[i] = m_new;
  }
}

// The real columns only: D96's pad columns of O are never stored.
__device__ __forceinline__ void rescale(float (&o)[kDs / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      o[4 * j + 2 * i] *= alpha[i];
      o[4 * j + 2 * i + 1] *= alpha[i];
    }
}

// P: consecutive pairs of S's registers are P's A fragments, 4 per k16 slice.
__device__ __forceinline__ void to_p(const float (&sc)[kBN / 2], uint32_t (&p)[kBN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) p[kk][r] = pack2(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
}

// Ping-pong (EVO_PINGPONG): the consumer warpgroups take turns issuing their GEMMs,
// round robin over named barriers 1..kWgs, so that while one warpgroup's GEMMs run on
// the tensor cores the others do their softmax. A turn: wait at the own barrier until
// the previous warpgroup has issued, issue, then let the next one go. The last
// warpgroup opens the first round; its very last hand-over has nobody to wait for it
// and is skipped, so every barrier sees exactly as many arrivals as waits.
// A chain (EVO_OVERLAP 2) runs with total = -1, so every turn is handed over, and sets
// total = taken + 1 before its last one.
struct Turns {
  int cw, total, taken;
  __device__ void begin() {
#if EVO_PINGPONG
    asm volatile("bar.sync %0, 256;" ::"r"(1 + cw) : "memory");
#endif
  }
  __device__ void end() {
#if EVO_PINGPONG
    ++taken;
    if (!(cw == kWgs - 1 && taken == total))
      asm volatile("bar.arrive %0, 256;" ::"r"(1 + (cw + 1) % kWgs) : "memory");
#endif
  }
  __device__ void open() {
#if EVO_PINGPONG
    if (cw == kWgs - 1 && total != 0) asm volatile("bar.arrive 1, 256;" ::: "memory");
#endif
  }
  // The turns left to take, empty (EVO_WG_KEYS: a warpgroup with fewer tiles).
  __device__ void pad() {
#if EVO_PINGPONG
    while (taken < total) {
      begin();
      end();
    }
#endif
  }
};

// ============================================================ 6. the scheduler

// Which tile a CTA computes. Without EVO_PERSISTENT each CTA computes the tile of its
// block index (kernels/ABI.md's grid). A persistent CTA takes tiles blockIdx.x,
// blockIdx.x + gridDim.x, ...: non-causal in order, query blocks of a head side by
// side (their CTAs read the same K and V at about the same time, from L2); causal
// longest first (the last query blocks see the most keys), so the short tiles fill
// the end instead of the long ones trailing it.
//
// Balanced blocks: the ceil(Lq / 64) warpgroup rows (64 query rows each) are cut into
// the grid's ceil(Lq / kBM) blocks, whose sizes differ by at most one warpgroup row:
// `small` blocks of q rows, then the rest of q + 1. With three consumer warpgroups at
// Lq 1024 that is 3,3,3,3,2,2 warpgroup rows instead of 3,3,3,3,3,1: the same number of
// blocks, and no block whose warpgroups mostly compute rows past Lq. A warpgroup with
// no rows in its block skips the GEMMs (it still keeps the barriers' counts). A
// persistent non-causal CTA takes the larger blocks first, so that a CTA's tiles mix
// sizes instead of repeating one query block's size (132 SMs and 6 blocks a head would
// give CTA x the block x % 6 every time); causal ones come last in index order, which
// the longest-first order takes first.
struct Schedule {
  int m_blocks, bhs, causal, lq;
  int q, small;  // warpgroup rows per smaller block; how many blocks are smaller
  __device__ Schedule(int lq_, int bhs_, int causal_)
      : m_blocks((lq_ + kBM - 1) / kBM), bhs(bhs_), causal(causal_), lq(lq_) {
    const int wg_rows = (lq_ + 63) / 64;
    q = wg_rows / m_blocks;
    small = m_blocks - wg_rows % m_blocks;
  }
  __device__ int tiles() const { return m_blocks * bhs * kSplit; }
  // The rows of query block mb.
  __device__ void rows(Work& w) const {
    const int mb = w.m_block;
    const int first = mb <= small ? mb * q : small * q + (mb - small) * (q + 1);
    const int size = mb < small ? q : q + 1;
    w.row0 = first * 64;
    w.row_end = min((first + size) * 64, lq);
  }
  __device__ Work at(int t) const {
    Work w;
    // Merged in a cluster, a query block's splits are consecutive tiles, so that the
    // CTAs of a cluster (consecutive in x, the grid a multiple of the split) take the
    // same block: the split is t's remainder, and the rest orders the blocks.
    constexpr int kS = kCluster ? 1 : kSplit;
    const int split = kCluster ? t % kSplit : 0;
    if (kCluster) t /= kSplit;
    if (causal) {
      const int per_block = bhs * kS;
      w.m_block = m_blocks - 1 - t / per_block;
      w.bh = (t % per_block) % bhs;
      w.split = (t % per_block) / bhs;
    } else {
      // The larger blocks (indices small..m_blocks-1) of every head first.
      const int big = (m_blocks - small) * bhs * kS;
      const int n = t < big ? m_blocks - small : small, off = t < big ? small : 0;
      const int u = t < big ? t : t - big;
      w.m_block = off + u % n;
      w.bh = (u / n) % bhs;
      w.split = u / n / bhs;
    }
    if (kCluster) w.split = split;
    rows(w);
    return w;
  }
  __device__ Work of_block() const {
    // Causal blocks further down see more keys: launch them first, so the short ones
    // fill the last wave instead of the long ones trailing it.
    Work w{causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x, (int)blockIdx.y,
           (int)blockIdx.z, 0, 0};
    rows(w);
    return w;
  }
  // The tiles this CTA computes: t = first, first + stride, ... while t < count.
  __device__ int first() const { return kPersistent ? blockIdx.x : 0; }
  __device__ int stride() const { return kPersistent ? gridDim.x : 1; }
  __device__ int count() const { return kPersistent ? tiles() : 1; }
  __device__ Work work(int t) const { return kPersistent ? at(t) : of_block(); }
};

// The split's KV tiles: the tiles the block's rows see (kernels/mask.cuh), cut into
// kSplit contiguous chunks (kernels/ABI.md). It may be empty.
struct KvRange {
  int begin, count;
};
__device__ __forceinline__ KvRange kv_range(const Work& w, const Mask& mk) {
  const int2 seen = mk.tiles(w.row0, w.row_end - 1, kBN);
  const int per_split = (seen.y - seen.x + kSplit - 1) / kSplit;
  const int begin = seen.x + w.split * per_split;
  const int end = min(seen.y, begin + per_split);
  return KvRange{begin, max(0, end - begin)};
}

}  // namespace evo
