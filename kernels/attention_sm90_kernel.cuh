// evo: the Hopper template, section 7 (the kernels): evo_attention_fwd, one producer
// warpgroup and EVO_CONSUMER_WGS consumer warpgroups over the tiles the scheduler hands
// the CTA. Appended by the host after kernels/attention_sm90.cu (sections 1-3) and
// kernels/attention_sm90_roles.cuh (sections 4-6); NVRTC only.

// ============================================================ 7. the kernels

#if EVO_TMA_O
#define EVO_TENSOR_MAP_PARAMS                                                           \
  const __grid_constant__ TensorMap tm_q, const __grid_constant__ TensorMap tm_k, \
      const __grid_constant__ TensorMap tm_v, const __grid_constant__ TensorMap tm_o,
#elif EVO_KV_LOAD == 2
#define EVO_TENSOR_MAP_PARAMS                                                           \
  const __grid_constant__ TensorMap tm_q, const __grid_constant__ TensorMap tm_k, \
      const __grid_constant__ TensorMap tm_v,
#else
#define EVO_TENSOR_MAP_PARAMS
#endif

#if EVO_CLUSTER_COMBINE && EVO_PERSISTENT
// A persistent grid is one row of CTAs, a multiple of the split (kernels/ABI.md): CTA x's
// tiles all have split x % splits, the cluster rank.
#define EVO_CLUSTER_DIMS __cluster_dims__(EVO_SPLIT_KV, 1, 1)
#elif EVO_CLUSTER_COMBINE
#define EVO_CLUSTER_DIMS __cluster_dims__(1, 1, EVO_SPLIT_KV)
#else
#define EVO_CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(evo::kThreads, 1) EVO_CLUSTER_DIMS
    evo_attention_fwd(EVO_TENSOR_MAP_PARAMS const elem_t* __restrict__ Q,
                      const elem_t* __restrict__ K, const elem_t* __restrict__ V,
                      elem_t* __restrict__ O, float* __restrict__ ws_o,
                      float* __restrict__ ws_lse, int B, int H_in, int Lq_in, int Lk,
                      int causal, float scale, int Hkv, int diag, int win_left, int win_right
#if EVO_LSE
                      , float* __restrict__ lse
#endif
                      ) {
  using namespace evo;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  Smem sm;
  sm.q = base;
  sm.o = kPersistent ? base + kQBytes : base;
  sm.k0 = base + kQBytes + kOBytes;
  sm.v0 = sm.k0 + kStages * kTileBytes;
  sm.bars = sm.v0 + kStages * kTileBytes;
  sm.exchange = sm.bars + kBarrierBytes;
  sm.keys = sm.exchange + kExchangeBytes;
  // Packed (EVO_PACK_GQA): a head of the launch is a K/V head, and its rows are the Lq
  // queries of each of its G query heads in turn; H and Lq below count those.
  constexpr bool kPack = EVO_PACK_GQA != 0;
  const int H = kPack ? Hkv : H_in;
  const int Lq = kPack ? Lq_in * (H_in / Hkv) : Lq_in;
  const Schedule sched(Lq, B * H, causal);
  const Mask mk{Lk, causal, diag, win_left, win_right, kPack ? Lq_in : 0};

  if (kDs != kD && kLoad != kTma) {
    // D96 without TMA: the pads the producer never writes are zeroed once, made visible
    // to wgmma (async proxy), and ordered before every load by the __syncthreads below.
    zero_pad(sm.q, kBM);
    if (kOBytes) zero_pad(sm.o, kBM);
    for (int s = 0; s < kStages; ++s) {
      zero_pad(sm.k(s), kBN);
      zero_pad(sm.v(s), kBN);
    }
    fence_async_proxy();
  }

  // One arrival per filling thread (TMA: one thread plus the transaction bytes);
  // the `_empty` barriers count one arrival per consumer warp.
  constexpr uint32_t kFillers = kLoad == kTma ? 1 : 128;
  if (threadIdx.x == 0) {
    for (int j = 0; j < (kChained ? 2 : 1); ++j) {
      mbar_init(sm.q_full(j), kFillers);
      mbar_init(sm.q_empty(j), kWgs * 4);
    }
    for (int s = 0; s < kStages; ++s) {
      mbar_init(sm.k_full(s), kFillers);
      mbar_init(sm.v_full(s), kFillers);
      mbar_init(sm.k_empty(s), (kWgKeys ? 1 : kWgs) * 4);  // split keys: the tile's own
      mbar_init(sm.v_empty(s), (kWgKeys ? 1 : kWgs) * 4);
    }
    if (kCluster)
      for (int j = 0; j < kWgs; ++j)
        for (int b = 0; b < kExchanges; ++b) mbar_init(sm.merged(j, b), 1);  // + the bytes
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Cluster merge: the other CTAs may arrive on this one's barriers from now on.
  if (kCluster) evo_cluster::arrive_all();

  // Warp-uniform to the compiler (a shuffle from lane 0, as CUTLASS does): branches on
  // the warpgroup (its role, an idle warpgroup) then need no divergent fallback paths.
  const int wg = __shfl_sync(0xffffffff, threadIdx.x / 128, 0);
  if (wg == 0) {
    // ---------------------------------------------------------------- producer
    if (kProducerRegs) setmaxnreg_dec<kProducerRegs ? kProducerRegs : 24>();
    // `kv` counts the K/V tiles this CTA has loaded over all its tiles: the ring's
    // stage and phase continue from one tile to the next. `k` counts its tiles: Q's
    // phase. A fresh barrier is in phase 0, so the first waits on the empties return.
#if EVO_KV_LOAD == 2
    if (threadIdx.x == 0) {
      int kv = 0;
      for (int t = sched.first(), k = 0; t < sched.count(); t += sched.stride(), ++k) {
        const Work w = sched.work(t);
        const KvRange r = kv_range(w, mk);
        const int kvh = kPack ? w.bh : kv_head_of(w.bh, H_in, Hkv);
        const int slot = q_slot(k);
        mbar_wait(sm.q_empty(slot), q_parity(k) ^ 1);
        mbar_expect_tx(sm.q_full(slot), kQBytes);
        for (int b = 0; b < kColBlocks; ++b)
          tma_load(sm.q_at(slot) + b * kBM * kRowBytes, &tm_q, sm.q_full(slot), b * 64,
                   w.row0, w.bh);
        for (int it = 0; it < r.count; ++it, ++kv) {
          const int s = kv % kStages;
          const uint32_t free_parity = ((kv / kStages) & 1) ^ 1;
          const int n0 = (r.begin + it) * kBN;
          mbar_wait(sm.k_empty(s), free_parity);
          mbar_expect_tx(sm.k_full(s), kTileBytes);
          for (int b = 0; b < kColBlocks; ++b)
            tma_load(sm.k(s) + b * kBN * kRowBytes, &tm_k, sm.k_full(s), b * 64, n0, kvh);
          mbar_wait(sm.v_empty(s), free_parity);
          mbar_expect_tx(sm.v_full(s), kTileBytes);
          for (int b = 0; b < kColBlocks; ++b)
            tma_load(sm.v(s) + b * kBN * kRowBytes, &tm_v, sm.v_full(s), b * 64, n0, kvh);
        }
      }
    }
#else
    int kv = 0;
    for (int t = sched.first(), k = 0; t < sched.count(); t += sched.stride(), ++k) {
      const Work w = sched.work(t);
      const KvRange r = kv_range(w, mk);
      const size_t q_head = (size_t)w.bh * Lq * kD;
      const size_t kv_head = (size_t)(kPack ? w.bh : kv_head_of(w.bh, H_in, Hkv)) * Lk * kD;
      const int slot = q_slot(k);
      mbar_wait(sm.q_empty(slot), q_parity(k) ^ 1);
      copy_tile<kBM>(sm.q_at(slot), Q + q_head, w.row0, Lq);
      copies_landed(sm.q_full(slot));
      for (int it = 0; it < r.count; ++it, ++kv) {
        const int s = kv % kStages;
        const uint32_t free_parity = ((kv / kStages) & 1) ^ 1;
        const int n0 = (r.begin + it) * kBN;
        mbar_wait(sm.k_empty(s), free_parity);
        copy_tile<kBN>(sm.k(s), K + kv_head, n0, Lk);
        copies_landed(sm.k_full(s));
        mbar_wait(sm.v_empty(s), free_parity);
        copy_tile<kBN>(sm.v(s), V + kv_head, n0, Lk);
        copies_landed(sm.v_full(s));
      }
    }
#endif
    if (kCluster) evo_cluster::leave(false);
    return;
  }

  // ------------------------------------------------------------------ consumers
  if (kProducerRegs) setmaxnreg_inc<kProducerRegs ? kConsumerRegs : 240>();
  Consumer c;
  c.cw = wg - 1;
  const int tid = threadIdx.x % 128, warp = tid / 32;
  c.lane = tid % 32;
  c.quad = c.lane % 4;
#if EVO_EXP2
  c.score_scale = scale * 1.4426950408889634f;  // scores in log2 units
#else
  c.score_scale = scale;
#endif
  c.mk = mk;
  const int lane = c.lane, quad = c.quad;

  // Accumulators in wgmma's layout: value 4j + 2i + e is row row[i], column 8j + 2 quad + e.
  // O has kDs columns (D96: 128, the last 32 never stored).
  float o[kDs / 2];
  float sc[kBN / 2];
  uint32_t p[kBN / 16][4];
  float alpha[2];

  // The epilogue: O / l of a finished tile's rows, staged through shared memory at
  // `o_wg` (the warpgroup's rows of a Q-sized buffer), or a split's share.
  auto store_o = [&](Finished f, const Work& w, uint32_t o_wg) {
    // A warpgroup with no rows in the block (balanced blocks) stores nothing; the
    // named barriers below are its own.
    if (f.wg_row0 >= w.row_end) return;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      f.l[i] += __shfl_xor_sync(0xffffffff, f.l[i], 1);
      f.l[i] += __shfl_xor_sync(0xffffffff, f.l[i], 2);
    }
    if (kSplit > 1) {
      // The split's share: o / l (fp32) and the natural-log lse into the workspace.
      const size_t BH = (size_t)B * H;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int rr = f.wg_row0 + warp * 16 + lane / 4 + 8 * i;
        if (rr >= w.row_end) continue;
        const float inv = f.l[i] > 0.0f ? 1.0f / f.l[i] : 0.0f;
        const size_t at = ((size_t)w.split * BH + w.bh) * Lq + rr;
        float* out = ws_o + at * kD;
#pragma unroll
        for (int j = 0; j < kD / 8; ++j)
          *reinterpret_cast<float2*>(out + 8 * j + 2 * quad) =
              make_float2(o[4 * j + 2 * i] * inv, o[4 * j + 2 * i + 1] * inv);
        if (quad == 0) ws_lse[at] = row_lse(f.m[i], f.l[i]);
      }
      return;
    }
#if EVO_LSE
    if (lse != nullptr) store_lse(lse + (size_t)w.bh * Lq, f, w.row_end, warp, lane);
#endif
    if (kDirectO) {
      // From the registers, without shared memory. Lane q of a quad holds columns
      // 8j + 2q, +1 of its rows for every 8-column group j; a 4 x 4 transpose inside the
      // quad (two exchanges, partners q ^ 2 then q ^ 1) gives lane q all 8 columns of
      // group 4g + q, so each lane stores 16 bytes and a quad 64 contiguous bytes of a row.
      const int hb = quad >> 1, lb = quad & 1;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int rr = f.wg_row0 + warp * 16 + lane / 4 + 8 * i;
        const float inv = f.l[i] > 0.0f ? 1.0f / f.l[i] : 0.0f;
        elem_t* out = O + ((size_t)w.bh * Lq + rr) * kD + 8 * quad;
#pragma unroll
        for (int g = 0; g < kD / 32; ++g) {
          uint32_t a[4];
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
            a[jj] = pack2(o[4 * (4 * g + jj) + 2 * i] * inv, o[4 * (4 * g + jj) + 2 * i + 1] * inv);
          // Partner q ^ 2: keep groups 2 hb, 2 hb + 1, take the partner's of those.
          const uint32_t k0 = hb ? a[2] : a[0], k1 = hb ? a[3] : a[1];
          const uint32_t r0 = __shfl_xor_sync(0xffffffff, hb ? a[0] : a[2], 2);
          const uint32_t r1 = __shfl_xor_sync(0xffffffff, hb ? a[1] : a[3], 2);
          // Partner q ^ 1: keep group 2 hb + lb = q; x[s ^ q] is lane s's pair of it.
          const uint32_t x0 = lb ? k1 : k0, x2 = lb ? r1 : r0;
          const uint32_t x1 = __shfl_xor_sync(0xffffffff, lb ? k0 : k1, 1);
          const uint32_t x3 = __shfl_xor_sync(0xffffffff, lb ? r0 : r1, 1);
          const uint32_t lo0 = lb ? x1 : x0, lo1 = lb ? x0 : x1;  // x[lb], x[lb ^ 1]
          const uint32_t hi0 = lb ? x3 : x2, hi1 = lb ? x2 : x3;  // x[2 + lb], x[2 + (lb ^ 1)]
          const uint4 v = make_uint4(hb ? hi0 : lo0, hb ? hi1 : lo1, hb ? lo0 : hi0,
                                     hb ? lo1 : hi1);
          if (rr < w.row_end) *reinterpret_cast<uint4*>(out + 32 * g) = v;
        }
      }
      return;
    }
    // O through shared memory, so the global stores are whole 16-byte chunks of a row
    // (the accumulator layout would store 4 bytes per lane, 16 bytes per row segment).
    // The staging keeps the 128-byte swizzle, which also makes these stores
    // conflict-free (a warp's 8 rows fall in 8 different 16-byte slots), and is the
    // layout the copy engine reads with O's map (EVO_O_TMA).
    fence_async_proxy();
    if (kPersistent && !kChained) {
      // A persistent warpgroup's threads may still be reading the last tile's O, or
      // (EVO_O_TMA) its copy-engine store: the issuing thread waits for that first.
      if (kTmaO && tid == 0) bulk_wait_read<0>();
      asm volatile("bar.sync %0, 128;" ::"r"(4 + c.cw) : "memory");
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int lr = warp * 16 + lane / 4 + 8 * i;
      const float inv = f.l[i] > 0.0f ? 1.0f / f.l[i] : 0.0f;
#pragma unroll
      for (int j = 0; j < kD / 8; ++j) {
        const int col = 8 * j + 2 * quad;
        const uint32_t at = o_wg + (col / 64) * kBM * kRowBytes + lr * kRowBytes +
                            ((((col % 64) / 8) ^ (lr % 8)) * 16) + (col % 8) * 2;
        const uint32_t v = pack2(o[4 * j + 2 * i] * inv, o[4 * j + 2 * i + 1] * inv);
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(at), "r"(v) : "memory");
      }
    }
#if EVO_TMA_O
    // Every thread's writes made visible to the copy engine, then one thread stores the
    // warpgroup's 64 rows, a box per 64-column block. The map's bounds drop rows past Lq
    // (a warpgroup's rows are whole 64-row steps of its block until Lq: section 6) and
    // D96's pad columns. The buffer is free again once the store has read it: at once
    // for Q's rows and a chained tile's slot (its release follows), at the next tile's
    // epilogue for a persistent CTA's own O buffer, and before the kernel ends.
    fence_async_proxy();
    asm volatile("bar.sync %0, 128;" ::"r"(4 + c.cw) : "memory");
    if (tid == 0) {
#pragma unroll
      for (int b = 0; b < kColBlocks; ++b)
        tma_store(&tm_o, o_wg + b * kBM * kRowBytes, b * 64, f.wg_row0, w.bh);
      bulk_commit();
      if (!kPersistent || kChained) bulk_wait_read<0>();
    }
    return;
#endif
    asm volatile("bar.sync %0, 128;" ::"r"(4 + c.cw) : "memory");  // this warpgroup only
    constexpr int kChunks = 64 * kD / 8;
#pragma unroll 4
    for (int ch = tid; ch < kChunks; ch += 128) {
      const int lr = ch / (kD / 8), chunk = ch % (kD / 8);
      const int rr = f.wg_row0 + lr;
      if (rr >= w.row_end) continue;
      const uint32_t at = o_wg + (chunk / 8) * kBM * kRowBytes + lr * kRowBytes +
                          (((chunk % 8) ^ (lr % 8)) * 16);
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(at)
                   : "memory");
      *reinterpret_cast<uint4*>(O + ((size_t)w.bh * Lq + rr) * kD + chunk * 8) = v;
    }
  };
  auto zero_o = [&]() {
#pragma unroll
    for (int i = 0; i < kDs / 2; ++i) o[i] = 0.0f;
  };
  auto keep_o_p = [&]() {
#pragma unroll
    for (int i = 0; i < kDs / 2; ++i) keep(o[i]);
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
      for (int r4 = 0; r4 < 4; ++r4) keep(p[kk][r4]);
  };
  auto keep_s = [&]() {
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) keep(sc[i]);
  };
  // One arrival per warp: this warp is done with a Q slot, or with the K (or V) at
  // ring position `pos` (the stage pos % kStages, in its (pos / kStages)-th use).
  auto arrive = [&](uint32_t bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  auto stage = [](int pos) { return pos % kStages; };
  auto parity = [](int pos) { return (uint32_t)((pos / kStages) & 1); };

  // Whether this warpgroup has waited on the cluster barrier's first phase (before its
  // first merge); the warpgroups that never merge wait on it when they leave.
  bool cluster_waited = false;
#if EVO_OVERLAP == 2
  // Chained: the CTA's tiles are one stream of K/V steps. A step issues the next
  // tile's S = Q K^T (of this query tile, or the first of the next one) before this
  // one's O += P V and runs its softmax while P V is on the tensor cores, so a tile's
  // first S and softmax hide under the previous tile's last P V, and its epilogue
  // follows. Q has two slots; a tile's slot is released after its epilogue, which
  // stages O there. A chain ends before a tile whose rows see no key (or at the last
  // tile): its last P V is waited for alone, as in the unchained kernel.
  // A tile's first O += P V does not read O (`fresh`): O is never zeroed in the chain.
  // The warpgroup's rows of the k-th tile's Q slot.
  auto q_rows = [&](int k) { return sm.q_at(q_slot(k)) + c.cw * 64 * kRowBytes; };
  // The k-th tile's epilogue, staged in its Q slot; then the slot is released. The
  // producer's next copy into it is the async proxy: the reads are ordered before it.
  auto end_tile = [&](const Finished& f, const Work& w, int k) {
    store_o(f, w, q_rows(k));
    fence_async_proxy();
    arrive(sm.q_empty(q_slot(k)));
  };
  int kv = 0;  // ring position of the current step's K/V
  for (int t = sched.first(), k = 0; t < sched.count();) {
    Work w = sched.work(t);
    KvRange r = kv_range(w, mk);
    c.begin(w, warp);
    zero_o();
    mbar_wait(sm.q_full(q_slot(k)), q_parity(k));
    if (r.count == 0) {
      end_tile(c.finish(), w, k);
      t += sched.stride(), ++k;
      continue;
    }
    Turns turns{c.cw, -1, 0};  // -1: every turn is handed over until the chain's last
    turns.open();
    mbar_wait(sm.k_full(stage(kv)), parity(kv));
    turns.begin();
    issue_qk(sc, q_rows(k), sm.k(stage(kv)));
    turns.end();
    wgmma_wait<0>();
    keep_s();
    arrive(sm.k_empty(stage(kv)));
    softmax(c, sc, r.begin * kBN, alpha);
    to_p(sc, p);
    bool fresh = true;
    for (int it = 0;; ++kv) {
      // The next step: this tile's next K/V, or the next tile's first.
      const bool new_tile = it + 1 == r.count;
      Work wn = w;
      KvRange rn = r;
      if (new_tile) {
        if (t + sched.stride() >= sched.count()) break;
        wn = sched.work(t + sched.stride());
        rn = kv_range(wn, mk);
        if (rn.count == 0) break;
      }
      const int kn = new_tile ? k + 1 : k;
      const int n0 = (new_tile ? rn.begin : r.begin + it + 1) * kBN;
      mbar_wait(sm.k_full(stage(kv + 1)), parity(kv + 1));
      if (new_tile) mbar_wait(sm.q_full(q_slot(kn)), q_parity(kn));
      turns.begin();
      issue_qk(sc, q_rows(kn), sm.k(stage(kv + 1)));
      rescale(o, alpha);
      mbar_wait(sm.v_full(stage(kv)), parity(kv));
      issue_pv(o, p, sm.v(stage(kv)), !fresh);
      turns.end();
      wgmma_wait<1>();
      keep_s();
      arrive(sm.k_empty(stage(kv + 1)));
      const Finished fin = c.finish();
      if (new_tile) c.begin(wn, warp);
      softmax(c, sc, n0, alpha);
      wgmma_wait<0>();
      keep_o_p();
      arrive(sm.v_empty(stage(kv)));
      to_p(sc, p);
      if (new_tile) {
        end_tile(fin, w, k);
        w = wn, r = rn, t += sched.stride(), ++k, it = 0;
      } else {
        ++it;
      }
      fresh = new_tile;
    }
    // The chain's last step: its P V alone, then the epilogue.
    turns.total = turns.taken + 1;
    rescale(o, alpha);
    mbar_wait(sm.v_full(stage(kv)), parity(kv));
    turns.begin();
    issue_pv(o, p, sm.v(stage(kv)), !fresh);
    turns.end();
    wgmma_wait<0>();
    keep_o_p();
    arrive(sm.v_empty(stage(kv)));
    ++kv;
    end_tile(c.finish(), w, k);
    t += sched.stride(), ++k;
  }
#else
  int kv = 0;      // K/V tiles consumed by this CTA so far: the ring's position
  int merges = 0;  // cluster merges this warpgroup has made: its exchange and phase
  for (int t = sched.first(), k = 0; t < sched.count(); t += sched.stride(), ++k) {
    const Work w = sched.work(t);
    const KvRange r = kv_range(w, mk);
    const int n_all = r.count, t_begin = r.begin;
    // This warpgroup's tiles, it = 0 .. n_tiles - 1, at ring position kv + pos(it): all
    // of the block's, or (EVO_WG_KEYS) every kWgs-th from its own index.
    const int n_tiles = !kWgKeys ? n_all : n_all > c.cw ? (n_all - c.cw + kWgs - 1) / kWgs : 0;
    auto pos = [&](int it) { return kWgKeys ? c.cw + it * kWgs : it; };
    // Ping-pong turns go round the warpgroups, so every warpgroup takes as many as the
    // one with the most tiles (warpgroup 0); one with fewer takes the rest empty.
    const int n_turned = kWgKeys ? (n_all + kWgs - 1) / kWgs : n_tiles;
    const uint32_t q_wg = sm.q + (kWgKeys ? 0 : c.cw * 64 * kRowBytes);
    c.begin(w, warp);
    zero_o();
    mbar_wait(sm.q_full(0), q_parity(k));
    // Q is released once the warpgroup's last S = Q K^T has completed.
    auto release_k = [&](int it) {
      arrive(sm.k_empty(stage(kv + pos(it))));
      if (it == n_tiles - 1) arrive(sm.q_empty(0));
    };
    auto release_v = [&](int it) { arrive(sm.v_empty(stage(kv + pos(it)))); };
    if (n_tiles == 0) arrive(sm.q_empty(0));
    // A warpgroup with no rows in this block: the loops below without their GEMMs and
    // softmax, keeping the same waits, releases and ping-pong turns in the same order.
    const bool idle = c.wg_row0 >= w.row_end;

#if EVO_OVERLAP
    // Intra-warpgroup overlap (FlashAttention-3): tile j+1's S = Q K^T is issued before
    // tile j's O += P V, and its softmax runs while P V is on the tensor cores.
    Turns turns{c.cw, n_turned > 0 ? n_turned + 1 : 0, 0};
    turns.open();
    if (idle) {
      for (int it = 0; it < n_tiles; ++it) {
        mbar_wait(sm.k_full(stage(kv + pos(it))), parity(kv + pos(it)));
        turns.begin();
        if (it > 0) mbar_wait(sm.v_full(stage(kv + pos(it - 1))), parity(kv + pos(it - 1)));
        turns.end();
        release_k(it);
        if (it > 0) release_v(it - 1);
      }
      if (n_tiles > 0) {
        mbar_wait(sm.v_full(stage(kv + pos(n_tiles - 1))), parity(kv + pos(n_tiles - 1)));
        turns.begin();
        turns.end();
        release_v(n_tiles - 1);
      }
    } else {
      if (n_tiles > 0) {
        mbar_wait(sm.k_full(stage(kv + pos(0))), parity(kv + pos(0)));
        turns.begin();
        issue_qk(sc, q_wg, sm.k(stage(kv + pos(0))));
        turns.end();
        wgmma_wait<0>();
        keep_s();
        release_k(0);
        softmax(c, sc, (t_begin + pos(0)) * kBN, alpha);
        to_p(sc, p);
      }
      for (int it = 1; it < n_tiles; ++it) {
        const int n0 = (t_begin + pos(it)) * kBN;
        mbar_wait(sm.k_full(stage(kv + pos(it))), parity(kv + pos(it)));
        turns.begin();
        issue_qk(sc, q_wg, sm.k(stage(kv + pos(it))));
        rescale(o, alpha);
        mbar_wait(sm.v_full(stage(kv + pos(it - 1))), parity(kv + pos(it - 1)));
        issue_pv(o, p, sm.v(stage(kv + pos(it - 1))));
        turns.end();
        wgmma_wait<1>();
        keep_s();
        release_k(it);
        softmax(c, sc, n0, alpha);
        wgmma_wait<0>();
        keep_o_p();
        release_v(it - 1);
        to_p(sc, p);
      }
      if (n_tiles > 0) {
        const int last = n_tiles - 1;
        rescale(o, alpha);
        mbar_wait(sm.v_full(stage(kv + pos(last))), parity(kv + pos(last)));
        turns.begin();
        issue_pv(o, p, sm.v(stage(kv + pos(last))));
        turns.end();
        wgmma_wait<0>();
        keep_o_p();
        release_v(last);
      }
    }
#else
    // One tile at a time: S = Q K^T, wait, softmax, O += P V, wait.
    Turns turns{c.cw, 2 * n_turned, 0};
    turns.open();
    for (int it = 0; it < n_tiles && idle; ++it) {
      mbar_wait(sm.k_full(stage(kv + pos(it))), parity(kv + pos(it)));
      turns.begin();
      turns.end();
      release_k(it);
      mbar_wait(sm.v_full(stage(kv + pos(it))), parity(kv + pos(it)));
      turns.begin();
      turns.end();
      release_v(it);
    }
    for (int it = 0; it < n_tiles && !idle; ++it) {
      const int n0 = (t_begin + pos(it)) * kBN;
      mbar_wait(sm.k_full(stage(kv + pos(it))), parity(kv + pos(it)));
      turns.begin();
      issue_qk(sc, q_wg, sm.k(stage(kv + pos(it))));
      turns.end();
      wgmma_wait<0>();
      keep_s();
      release_k(it);
      softmax(c, sc, n0, alpha);
      rescale(o, alpha);
      to_p(sc, p);
      mbar_wait(sm.v_full(stage(kv + pos(it))), parity(kv + pos(it)));
      turns.begin();
      issue_pv(o, p, sm.v(stage(kv + pos(it))));
      turns.end();
      wgmma_wait<0>();
      keep_o_p();
      release_v(it);
    }
#endif
    if (kWgKeys) turns.pad();
    kv += n_all;
#if EVO_WG_KEYS
    // The warpgroups' softmax states and O merge into warpgroup 0's (all of them have the
    // same rows, so `idle` is theirs alike); then warpgroup 0 alone goes on to the
    // epilogue. Thread t of every warpgroup holds the same rows and columns, and l's
    // per-lane partials all take their row's factor. The first barrier also keeps a
    // warpgroup from overwriting its exchange before warpgroup 0 has read the last one.
    if (!idle) {
      float* const keys = reinterpret_cast<float*>(smem_raw + (sm.keys - raw)) + tid;
      asm volatile("bar.sync 8, %0;" ::"r"(kWgs * 128) : "memory");
      if (c.cw > 0) {
        float* const mine = keys + (c.cw - 1) * kKeysFloats * 128;
#pragma unroll
        for (int j = 0; j < kDs / 2; ++j) mine[j * 128] = o[j];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          mine[(kDs / 2 + i) * 128] = c.m[i];
          mine[(kDs / 2 + 2 + i) * 128] = c.l[i];
        }
      }
      asm volatile("bar.sync 8, %0;" ::"r"(kWgs * 128) : "memory");
      if (c.cw > 0) continue;
      for (int g = 1; g < kWgs; ++g) {
        const float* const other = keys + (g - 1) * kKeysFloats * 128;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const float m1 = other[(kDs / 2 + i) * 128], l1 = other[(kDs / 2 + 2 + i) * 128];
          const float mx = fmaxf(c.m[i], m1);
          const float mu = mx == neg_inf() ? 0.0f : mx;  // both saw only masked keys
          const float a0 = EVO_EXPF(c.m[i] - mu), a1 = EVO_EXPF(m1 - mu);
          c.l[i] = c.l[i] * a0 + l1 * a1;
          c.m[i] = mx;
#pragma unroll
          for (int j = 0; j < kD / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              o[4 * j + 2 * i + e] = o[4 * j + 2 * i + e] * a0 + other[(4 * j + 2 * i + e) * 128] * a1;
        }
      }
    } else if (c.cw > 0) {
      continue;
    }
#endif
    if (kCluster) {
      // The splits merge in the cluster; each CTA stores its slice of O's columns. The
      // CTAs of a cluster compute the same query block, so a warpgroup with no rows has
      // none in any of them, and their merge counts stay equal.
      if (k == 0) {
        evo_cluster::wait_all();  // the other CTAs' barriers are initialised
        cluster_waited = true;
      }
      if (!idle) {
        const int b = merges % kExchanges;
        evo_cluster::merge<kD, kSplit, EVO_EXP2 != 0>(
            o, c.m, c.l, sm.exchange_of(c.cw, b), sm.merged(c.cw, b),
            (uint32_t)(merges / kExchanges) & 1, tid,
            [&](int j, int i, float a, float b) {
              const int rr = c.wg_row0 + warp * 16 + lane / 4 + 8 * i;
              if (rr < w.row_end)
                *reinterpret_cast<uint32_t*>(O + ((size_t)w.bh * Lq + rr) * kD + 8 * j +
                                             2 * quad) = pack2(a, b);
            },
            [&](const float(&m)[2], const float(&l)[2]) {  // rank 0's rows
#if EVO_LSE
              if (lse != nullptr)
                store_lse(lse + (size_t)w.bh * Lq, {c.wg_row0, {m[0], m[1]}, {l[0], l[1]}},
                          w.row_end, warp, lane);
#endif
            });
        ++merges;
      }
      continue;
    }
    // Without EVO_PERSISTENT O is staged in the warpgroup's Q rows, free now (its last
    // S = Q K^T has completed) and of O's size; a persistent CTA stages O apart, since
    // the next tile's Q may be landing.
    store_o(c.finish(), w, (kPersistent ? sm.o : sm.q) + c.cw * 64 * kRowBytes);
  }
#endif
  // The last copy-engine store has read its shared memory before the CTA's is released.
  if (kTmaO && tid == 0) bulk_wait_read<0>();
  if (kCluster) evo_cluster::leave(cluster_waited);
}

// The split-KV combine, evo_attention_combine, is kernels/combine.cuh (appended by the host).
