// evo: the FlashAttention-style forward template.
//
// One kernel, many designs: every design choice of a genome arrives as an
// integer `-D EVO_*` macro (see kernels/ABI.md for the list and the launch
// contract). The sections are ordered as the data flows (1-4 in this file, 5-9 in
// kernels/attention_paths.cuh, 10 in kernels/attention_kernel.cuh; the host compiles
// kernels/mask.cuh, kernels/mma.cuh, these three and kernels/combine.cuh as one program
// named after this file). The element type, the f16/bf16 conversions, ex2, ldmatrix,
// mma.sync m16n8k16, cp.async and the tile swizzle come from kernels/mma.cuh, shared
// with the backward template:
//
//   1. configuration     macros -> constexpr, validity static_asserts, smem plan
//   2. element helpers   the score exponential, lse, tile offsets in EVO_SMEM_LAYOUT
//   3. PTX wrappers      cp.async groups, the consumer barrier
//   4. tile staging      global -> shared (direct or cp.async, any layout/width)
//   5. S = Q K^T         scalar / wmma / mma, into shared memory (smem P path)
//   6. softmax in smem   online softmax over a tile of S, writes P (16-bit)
//   7. O += P V          scalar / wmma / mma, O in shared memory or registers
//   8. register path     FlashAttention-2: S, P and O in mma fragments
//   9. epilogues         O / l -> O (or the split-KV workspace)
//  10. the kernels       evo_attention_fwd (pipeline), evo_attention_combine
//
// NVRTC only: no std headers, no <cstdio>.

// Optional register cap (0 = none); see "Register budget" in section 10
// (kernels/attention_kernel.cuh).
#ifndef EVO_MAX_REGS
#define EVO_MAX_REGS 0
#endif

// The forward's log-sum-exp output (kernels/ABI.md, "The log-sum-exp output") is a
// compile-time choice the host always makes: 0 builds the kernels without it (no
// `evo_lse`, no `lse` argument, no store: what search, bench and inference run), 1 the
// lse twin. Compiled in but not asked for, it cost 1-2% on 8 of 13 H100 champions.
#if !defined(EVO_LSE) || (EVO_LSE != 0 && EVO_LSE != 1)
#error "EVO_LSE must be defined as 0 or 1 (kernels/ABI.md, The log-sum-exp output)"
#endif

#if EVO_QK_MATH == 1 || EVO_PV_MATH == 1
#include <mma.h>  // nvcuda::wmma, only where a WMMA path is compiled (needs crt/mma.h too)
#endif

// ============================================================ 1. configuration

namespace evo {

constexpr int kD = EVO_HEAD_DIM;
constexpr int kBM = EVO_BLOCK_M;
constexpr int kBN = EVO_BLOCK_N;
constexpr int kWarps = EVO_WARPS;                 // compute ("consumer") warps
constexpr int kProducers = EVO_PRODUCER_WARPS;    // warps that only stage K/V
constexpr int kConsumerThreads = kWarps * 32;
constexpr int kThreads = (kWarps + kProducers) * 32;
constexpr int kStages = EVO_STAGES;
constexpr int kSplit = EVO_SPLIT_KV;
constexpr int kVec = EVO_VEC_BYTES;

constexpr int kWmma = 1, kMma = 2;  // EVO_QK_MATH / EVO_PV_MATH values (0 = scalar)
constexpr int kPadded = 1, kSwizzled = 2;  // EVO_SMEM_LAYOUT values (0 = plain)

// Row pitches, in elements. Q/K/V: D halves (+8 when padded, which shifts each
// row by one 16-byte bank group). S: fp32, +4 so wmma's ldm stays a multiple of
// 16 bytes while rows start in different banks. P: 16-bit, +8 likewise (and
// every P row stays 16-byte aligned for ldmatrix). O: fp32, +4.
constexpr int kPitch = kD + (EVO_SMEM_LAYOUT == kPadded ? 8 : 0);
constexpr int kSPitch = kBN + 4;
constexpr int kPPitch = kBN + 8;
constexpr int kOPitch = kD + 4;

// The shared-memory plan. Must equal the host's formula byte for byte: the
// host launches with EVO_SMEM_BYTES, computed independently.
constexpr int kQBytes = kBM * kPitch * 2;
constexpr int kKVTileElems = kBN * kPitch;        // one K (or V) tile
constexpr int kKVBytes = kStages * 2 * kKVTileElems * 2;
constexpr int kSBytes = EVO_P_REGS ? 0 : kBM * kSPitch * 4;
constexpr int kPBytes = EVO_P_REGS ? 0 : kBM * kPPitch * 2;
constexpr int kStatsBytes = 3 * kBM * 4;          // m, l, alpha per row
constexpr int kOBytes = EVO_O_REGS ? 0 : kBM * kOPitch * 4;

constexpr int kQOff = 0;
constexpr int kKVOff = kQOff + kQBytes;
constexpr int kSOff = kKVOff + kKVBytes;
constexpr int kPOff = kSOff + kSBytes;
constexpr int kStatsOff = kPOff + kPBytes;
constexpr int kOOff = kStatsOff + kStatsBytes;
constexpr int kSmemTotal = kOOff + kOBytes;

// Registers per thread that EVO_MIN_BLOCKS resident CTAs leave: the register file
// is four 16K quarters, one per warp scheduler, and the fullest quarter holds
// ceil(resident warps / 4) warps (see "Register budget", kernels/attention_kernel.cuh). ptxas
// counts the same way under __launch_bounds__ (NVRTC 13.5, sm_90: 160 threads x 2
// blocks and 288 threads x 1 block both cap at 168, not 200 and 224).
#if EVO_P_REGS || EVO_MAX_REGS > 0
constexpr int kResidentWarps = kThreads / 32 * EVO_MIN_BLOCKS;
constexpr int kMinBlocksRegs = (16384 / ((kResidentWarps + 3) / 4 * 32)) / 8 * 8;
#endif

// Register-resident mma state (P in registers, or O in registers with mma P.V):
// each warp owns kSlices whole m16 slices of the CTA's rows.
#define EVO_REG_MMA_STATE (EVO_P_REGS || (EVO_O_REGS && EVO_PV_MATH == 2))
#if EVO_REG_MMA_STATE
constexpr int kSlices = kBM / (16 * kWarps);
#endif

// Register path: hold the warp's Q A-fragments in registers for the whole KV
// loop (kD/4 registers per m16 slice) instead of re-reading them with ldmatrix
// every tile, when the per-thread budget leaves room for them next to O, S and
// P. The budget is what __launch_bounds__ / EVO_MAX_REGS allow; the margin
// covers addressing, K/V fragments and softmax temporaries (checked against
// ptxas's report, sm_90: no uncapped register-path config of D, BLOCK_M/WARPS,
// BLOCK_N, MIN_BLOCKS 1-2 started spilling; one that already spilled under a
// 128-register cap spills a few percent more bytes). D = 96 needs 24 more: with
// 64 its BM64/4 warps BN128 and BN144 O-in-registers configs held Q at an estimate
// of 232 and 244 and spilled 8-52 bytes, and 248 registers without spills when not
// (NVRTC 13.5, sm_90, every layout); 88 leaves no uncapped D96 config of the
// sweep spilling because of Q.
#if EVO_P_REGS
constexpr int kRegBudget0 = kMinBlocksRegs < 255 ? kMinBlocksRegs : 255;
constexpr int kRegBudget = (EVO_MAX_REGS > 0 && EVO_MAX_REGS < kRegBudget0) ? EVO_MAX_REGS : kRegBudget0;
constexpr int kStateRegs = kSlices * ((EVO_O_REGS ? kD / 2 : 0) + kBN / 2 + kBN / 4);
constexpr int kQFragRegs = kSlices * kD / 4;
constexpr int kHoldQMargin = kD == 96 ? 88 : 64;
constexpr bool kHoldQ = kStateRegs + kQFragRegs + kHoldQMargin <= kRegBudget;
constexpr int kQFrags = kHoldQ ? kD / 16 : 1;  // k16 steps held (1 = unused placeholder)
#endif

static_assert(kD == 64 || kD == 96 || kD == 128 || kD == 256,
              "EVO_HEAD_DIM must be 64, 96, 128 or 256");
// Every loop over D steps by 16 columns (one k16 MMA step, one WMMA tile, two
// 16-byte chunks) and the swizzle below knows rows of 8k and 8k + 4 chunks only.
static_assert(kD % 16 == 0 && (kD / 8) % 4 == 0, "EVO_HEAD_DIM must be a multiple of 32");
static_assert(kBM == 16 || kBM == 32 || kBM == 64 || kBM == 128, "EVO_BLOCK_M must be 16, 32, 64 or 128");
static_assert(kBN % 16 == 0 && kBN >= 16 && kBN <= 256,
              "EVO_BLOCK_N must be a multiple of 16 up to 256 (16-column MMA and WMMA steps)");
static_assert(kWarps == 1 || kWarps == 2 || kWarps == 4 || kWarps == 8, "EVO_WARPS must be 1, 2, 4 or 8");
static_assert(kProducers >= 0 && kProducers <= 2, "EVO_PRODUCER_WARPS must be 0, 1 or 2");
static_assert(kStages >= 1 && kStages <= 4, "EVO_STAGES must be 1..4");
static_assert(!EVO_EXP_FMA || EVO_EXP2, "EVO_EXP_FMA computes exp2: it needs EVO_EXP2");
static_assert(kVec == 4 || kVec == 8 || kVec == 16, "EVO_VEC_BYTES must be 4, 8 or 16");
static_assert(kSplit >= 1 && kSplit <= 32 && (kSplit & (kSplit - 1)) == 0,
              "EVO_SPLIT_KV must be 1, 2, 4, 8, 16 or 32");
static_assert(EVO_MIN_BLOCKS >= 1 && EVO_MIN_BLOCKS <= 4, "EVO_MIN_BLOCKS must be 1..4");
static_assert(EVO_QK_MATH >= 0 && EVO_QK_MATH <= 2 && EVO_PV_MATH >= 0 && EVO_PV_MATH <= 2,
              "EVO_QK_MATH / EVO_PV_MATH must be 0 (scalar), 1 (wmma) or 2 (mma)");
static_assert(!EVO_P_REGS || (EVO_QK_MATH == kMma && EVO_PV_MATH == kMma),
              "rule p_regs_needs_mma: P in registers needs QK_MATH = PV_MATH = mma "
              "(the C fragment of S is the A fragment of P only for mma.sync)");
static_assert(!EVO_O_REGS || EVO_PV_MATH != kWmma,
              "rule o_regs_needs_known_layout: the WMMA accumulator layout is unspecified, "
              "so O rows cannot be rescaled in registers");
static_assert(EVO_SMEM_LAYOUT != kSwizzled || (EVO_QK_MATH != kWmma && EVO_PV_MATH != kWmma),
              "rule swizzle_needs_addressed_loads: load_matrix_sync needs a strided layout");
static_assert(!EVO_REG_MMA_STATE || kBM % (16 * kWarps) == 0,
              "rule warp_rows_per_slice: register-resident mma state needs BLOCK_M % (16*WARPS) == 0");
static_assert(kSmemTotal == EVO_SMEM_BYTES,
              "shared-memory plan mismatch: the template's layout total differs from the host's EVO_SMEM_BYTES (formula in kernels/ABI.md)");

}  // namespace evo

// The launch geometry, read by the host from the module (hand-written kernels
// self-describe the same way): block_m, threads per block, dynamic smem bytes,
// split_kv, combine rows per block, combine threads per block.
#define EVO_COMBINE_ROWS 4
#define EVO_COMBINE_THREADS (EVO_COMBINE_ROWS * 32)
// The second kernel ABI: K/V heads, the diagonal and the window are arguments.
extern "C" __constant__ int evo_abi[1] = {2};
#if EVO_LSE
// The forward's log-sum-exp (kernels/ABI.md, "The log-sum-exp output"): both kernels take
// `float* lse` last and write it when it is not null.
extern "C" __constant__ int evo_lse[1] = {1};
#endif
#if EVO_PACK_GQA
// Packed grouped-query heads (kernels/ABI.md): the host launches one row of heads per
// K/V head, with G x Lq rows each.
extern "C" __constant__ int evo_pack_gqa[1] = {1};
#endif

extern "C" __constant__ int evo_geometry[6] = {
    EVO_BLOCK_M, (EVO_WARPS + EVO_PRODUCER_WARPS) * 32, EVO_SMEM_BYTES,
    EVO_SPLIT_KV, EVO_COMBINE_ROWS, EVO_COMBINE_THREADS};

namespace evo {

// ============================================================ 2. element helpers

// With EVO_EXP2 the scores are pre-multiplied by scale*log2(e) (one FFMA per
// score) and exponentiated with exp2; m and the lse are then in log2 units until
// the epilogue converts back to natural log.
__device__ __forceinline__ float softmax_exp(float x) {
#if EVO_EXP2
  return ex2_approx(x);
#else
  return __expf(x);
#endif
}
// The score exponential of column `j`: with EVO_EXP_FMA (which needs EVO_EXP2) every
// other score takes the FMA-pipe polynomial, so MUFU does half of them.
__device__ __forceinline__ float score_exp(float x, int j) {
  return EVO_EXP_FMA && (j & 1) ? ex2_poly(x) : softmax_exp(x);
}
__device__ __forceinline__ float score_scale(float scale) {
#if EVO_EXP2
  return scale * 1.4426950408889634f;
#else
  return scale;
#endif
}
// Natural-log lse of a row from its running max m (scaled units) and sum l.
__device__ __forceinline__ float row_lse(float m, float l) {
  if (!(l > 0.0f)) return neg_inf();
#if EVO_EXP2
  return (m + __log2f(l)) * 0.6931471805599453f;
#else
  return m + __logf(l);
#endif
}
// exp(m_old - m_new) and the guard for a row that has seen only -inf so far:
// with m_new = -inf we subtract 0 instead, so every p and alpha is exp(-inf) = 0.
__device__ __forceinline__ float safe_max(float m) { return m == neg_inf() ? 0.0f : m; }

// Element (row, col) of a Q/K/V tile, in EVO_SMEM_LAYOUT (the swizzle: tile_offset,
// kernels/mma.cuh). One function serves stores, ldmatrix row addresses and scalar reads
// alike; ldmatrix and the K-fragment loads read aligned 8-row blocks (row0 % 8 == 0).
__device__ __forceinline__ int tile_off(int row, int col) {
  return tile_offset<kD, kPitch, EVO_SMEM_LAYOUT>(row, col);
}

// ============================================================ 3. PTX wrappers

__device__ __forceinline__ void cp_async_commit() {
#if EVO_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if EVO_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Barrier among the compute warps only. With producer warps a block-wide
// __syncthreads here would force them into the compute schedule; named
// barrier 1 counts just the consumers (barrier 0 is __syncthreads).
__device__ __forceinline__ void consumer_sync() {
  if (kProducers > 0) {
    asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
  } else {
    __syncthreads();
  }
}

// ============================================================ 4. tile staging

// Copy rows [row0, row0+ROWS) of a [L, D] matrix into a shared tile, EVO_VEC_BYTES
// per thread per step; rows >= L become zeros (so scores of padding keys are
// finite before masking, and padding V rows contribute 0 * 0).
// One chunk (EVO_VEC_BYTES) of row r, column c of the tile.
template <bool ASYNC>
__device__ __forceinline__ void load_chunk(elem_t* tile, const elem_t* __restrict__ g, int row0,
                                           int L, int r, int c) {
  typedef typename VecOf<kVec>::type vec_t;
  const bool valid = row0 + r < L;
  // An invalid row still needs a legal address: row 0 of this (b, h).
  const elem_t* src = g + (size_t)(valid ? row0 + r : 0) * kD + c;
  elem_t* dst = tile + tile_off(r, c);
  if (ASYNC) {
    cp_async<kVec>(dst, src, valid);
  } else {
    vec_t v = vec_t();
    if (valid) v = *reinterpret_cast<const vec_t*>(src);
    *reinterpret_cast<vec_t*>(dst) = v;
  }
}

// NL loader threads, 0 <= ltid < NL. The chunk count and NL are compile-time,
// so the copy is a fixed number of steps (fully unrolled when short: no
// remainder loop or per-step branch), and when NL is a multiple of the chunks
// per row each thread keeps one column and steps rows by NL / chunks-per-row.
template <int ROWS, bool ASYNC, int NL>
__device__ __forceinline__ void load_tile(elem_t* tile, const elem_t* __restrict__ g, int row0,
                                          int L, int ltid) {
  constexpr int kElems = kVec / 2;
  constexpr int kChunksPerRow = kD / kElems;
  constexpr int kTotal = ROWS * kChunksPerRow;
  constexpr int kIters = (kTotal + NL - 1) / NL;
  if constexpr (NL % kChunksPerRow == 0 && kIters <= 16) {
    constexpr int kRowStep = NL / kChunksPerRow;
    const int r0 = ltid / kChunksPerRow;
    const int c = (ltid % kChunksPerRow) * kElems;
    // unroll 4, not full: fully unrolled, ptxas spilled at the 255-register edge
    // (D128 BM128/4 warps/BN64: 44 B) while 4 steps per iteration did not.
#pragma unroll 4
    for (int it = 0; it < kIters; ++it) {
      if (kTotal % NL != 0 && r0 + it * kRowStep >= ROWS) break;
      load_chunk<ASYNC>(tile, g, row0, L, r0 + it * kRowStep, c);
    }
  } else if constexpr (kIters <= 16) {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int idx = ltid + it * NL;
      if (kTotal % NL != 0 && idx >= kTotal) break;
      load_chunk<ASYNC>(tile, g, row0, L, idx / kChunksPerRow, (idx % kChunksPerRow) * kElems);
    }
  } else {
#pragma unroll 4
    for (int it = 0; it < kIters; ++it) {
      const int idx = ltid + it * NL;
      if (kTotal % NL != 0 && idx >= kTotal) break;
      load_chunk<ASYNC>(tile, g, row0, L, idx / kChunksPerRow, (idx % kChunksPerRow) * kElems);
    }
  }
}

__device__ __forceinline__ elem_t* k_tile(elem_t* kv, int stage) {
  return kv + stage * 2 * kKVTileElems;
}
__device__ __forceinline__ elem_t* v_tile(elem_t* kv, int stage) {
  return kv + stage * 2 * kKVTileElems + kKVTileElems;
}

// Issue K and V of KV tile `tile` into `stage` (the caller commits the group).
__device__ __forceinline__ void issue_kv(elem_t* kv, int stage, const elem_t* __restrict__ K,
                                         const elem_t* __restrict__ V, int tile, int Lk,
                                         int ltid) {
  // The loaders: the producer warps if any, else every thread.
  constexpr int kLoaders = kProducers > 0 ? kProducers * 32 : kThreads;
  const int n0 = tile * kBN;
  load_tile<kBN, EVO_CP_ASYNC != 0, kLoaders>(k_tile(kv, stage), K, n0, Lk, ltid);
  load_tile<kBN, EVO_CP_ASYNC != 0, kLoaders>(v_tile(kv, stage), V, n0, Lk, ltid);
}

}  // namespace evo

// Sections 5-9: kernels/attention_paths.cuh; section 10: kernels/attention_kernel.cuh
// (appended in that order by the host, evo_codegen::template_source).
