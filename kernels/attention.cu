// evo: the FlashAttention-style forward template.
//
// One kernel, many designs: every design choice of a genome arrives as an
// integer `-D EVO_*` macro (see kernels/ABI.md for the list and the launch
// contract). The sections below are ordered as the data flows:
//
//   1. configuration     macros -> constexpr, validity static_asserts, smem plan
//   2. element helpers   f16/bf16 conversions, exp/exp2
//   3. PTX wrappers      ldmatrix, mma.sync m16n8k16, cp.async, named barrier
//   4. tile staging      global -> shared (direct or cp.async, any layout/width)
//   5. S = Q K^T         scalar / wmma / mma, into shared memory (smem P path)
//   6. softmax in smem   online softmax over a tile of S, writes P (16-bit)
//   7. O += P V          scalar / wmma / mma, O in shared memory or registers
//   8. register path     FlashAttention-2: S, P and O in mma fragments
//   9. epilogues         O / l -> O (or the split-KV workspace)
//  10. the kernels       evo_attention_fwd (pipeline), evo_attention_combine
//
// NVRTC only: no std headers, no <cstdio>.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// Optional register cap (0 = none); see "Register budget" in section 10.
#ifndef EVO_MAX_REGS
#define EVO_MAX_REGS 0
#endif

#if EVO_QK_MATH == 1 || EVO_PV_MATH == 1
#include <mma.h>  // nvcuda::wmma, only where a WMMA path is compiled (needs crt/mma.h too)
#endif

// ============================================================ 1. configuration

#if EVO_BF16
typedef __nv_bfloat16 elem_t;
typedef __nv_bfloat162 elem2_t;
#define EVO_MMA_TYPE "bf16"
#else
typedef __half elem_t;
typedef __half2 elem2_t;
#define EVO_MMA_TYPE "f16"
#endif

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
// ceil(resident warps / 4) warps (see "Register budget" in section 10). ptxas
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

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float to_float(elem_t x) {
#if EVO_BF16
  return __bfloat162float(x);
#else
  return __half2float(x);
#endif
}
__device__ __forceinline__ float2 to_float2(elem2_t x) {
#if EVO_BF16
  return __bfloat1622float2(x);
#else
  return __half22float2(x);
#endif
}
__device__ __forceinline__ elem_t from_float(float x) {
#if EVO_BF16
  return __float2bfloat16_rn(x);
#else
  return __float2half_rn(x);
#endif
}
__device__ __forceinline__ elem2_t from_float2(float lo, float hi) {
#if EVO_BF16
  return __floats2bfloat162_rn(lo, hi);
#else
  return __floats2half2_rn(lo, hi);
#endif
}
// Two values as one .b32 mma operand register: `lo` is the lower column.
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  elem2_t v = from_float2(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

// With EVO_EXP2 the scores are pre-multiplied by scale*log2(e) (one FFMA per
// score) and exponentiated with exp2; m and the lse are then in log2 units until
// the epilogue converts back to natural log.
__device__ __forceinline__ float softmax_exp(float x) {
#if EVO_EXP2
  // One MUFU.EX2: exp2f without fast-math adds denormal scaling around it, and
  // flushing p < 2^-126 to zero is harmless for softmax (ex2(-inf) = +0).
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return __expf(x);
#endif
}
// 2^x on the FMA pipe (EVO_EXP_FMA, with EVO_EXP2): n = round(x) by adding 1.5 * 2^23,
// 2^(x - n) by a degree-3 polynomial on [-0.5, 0.5] (relative error 1.8e-4), n into the
// exponent bits; every other score takes it, so MUFU (16 per clock per SM) does half.
__device__ __forceinline__ float softmax_exp_fma(float x) {
  const float t = x + 12582912.0f, f = x - (t - 12582912.0f);
  const float p = fmaf(fmaf(fmaf(0.0546022821f, f, 0.2419248f), f, 0.6933166125f), f, 1.0f);
  return x < -126.0f ? 0.0f : __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}
// The score exponential of column `j`.
__device__ __forceinline__ float score_exp(float x, int j) {
  return EVO_EXP_FMA && (j & 1) ? softmax_exp_fma(x) : softmax_exp(x);
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


// Element (row, col) of a Q/K/V tile. Swizzled: the 16-byte chunk index is
// XORed with (row & 7), so 8 rows read at the same logical chunk (ldmatrix)
// land in 8 different bank groups. col % 8 == 0 for vector/ldmatrix accesses,
// and a 4/8/16-byte vector never crosses a chunk, so this one function serves
// stores, ldmatrix row addresses and scalar reads alike.
//
// D = 96 (12 chunks a row): XOR with (row & 7) would send chunks 8..11 to 12..15,
// past the row. The swizzle stays in the row and conflict-free, in two parts:
//  - chunks 0..7 XOR (row & 7), as for every D. The 192-byte pitch puts odd rows
//    4 bank groups (64 bytes) after even ones, so the 8 rows of an aligned
//    8-row block at logical chunk c sit in group (c ^ (row & 7)) ^ 4 * (row & 1):
//    8 different groups.
//  - the tail, chunks 8..11, XOR ((row >> 1) & 3), which stays in 8..11: its group
//    is 4 * (row & 1) + ((c ^ (row >> 1)) & 3), again 8 different groups for
//    rows 0..7 of a block (row & 1 picks the half, (row >> 1) & 3 the group in it).
// ldmatrix and the K-fragment loads read aligned 8-row blocks (row0 % 8 == 0).
__device__ __forceinline__ int swizzle_chunk(int row, int ch) {
  constexpr int kTail = (kD / 8) % 8;  // 0, or 4 at D = 96
  if (kTail != 0 && ch >= kD / 8 - kTail) return ch ^ ((row >> 1) & (kTail - 1));
  return ch ^ (row & 7);
}
__device__ __forceinline__ int tile_off(int row, int col) {
#if EVO_SMEM_LAYOUT == 2
  return row * kPitch + (swizzle_chunk(row, col >> 3) << 3) + (col & 7);
#else
  return row * kPitch + col;
#endif
}

// ============================================================ 3. PTX wrappers

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8k..8k+7 give the row addresses of matrix k.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// Transposed on the way: how row-major V becomes the "col" B operand of P.V.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a (16x16, row) * b (16x8, col), fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." EVO_MMA_TYPE "." EVO_MMA_TYPE ".f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ldmatrix lane addressing (lane l, 16x16 block at rows r0, cols c0):
//  - A operand, or the .trans B operand of V: matrices (r0,c0) (r0+8,c0)
//    (r0,c0+8) (r0+8,c0+8)  ->  row r0 + (l & 15), col c0 + (l >> 4) * 8
//  - B operand of Q.K^T from row-major K for n-tiles r0 and r0+8: matrices
//    (r0,c0) (r0,c0+8) (r0+8,c0) (r0+8,c0+8), giving {b0,b1} of n-tile r0 then
//    of n-tile r0+8  ->  row r0 + (l & 7) + (l >> 4) * 8, col c0 + ((l >> 3) & 1) * 8
__device__ __forceinline__ int lm_row_a(int lane) { return lane & 15; }
__device__ __forceinline__ int lm_col_a(int lane) { return (lane >> 4) << 3; }
__device__ __forceinline__ int lm_row_b(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
__device__ __forceinline__ int lm_col_b(int lane) { return ((lane >> 3) & 1) << 3; }

// cp.async with zero-fill: src_bytes = 0 writes zeros and reads nothing
// (rows past the end of the sequence). .cg (bypass L1) exists only for 16 B.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  const int src_bytes = valid ? BYTES : 0;
  if (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "n"(BYTES), "r"(src_bytes));
  }
}
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

template <int BYTES> struct VecOf;
template <> struct VecOf<4> { typedef unsigned type; };
template <> struct VecOf<8> { typedef uint2 type; };
template <> struct VecOf<16> { typedef uint4 type; };

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
// key has l = 0 and gets o = 0, lse = -inf (weight 0 in the combine).

struct Out {
  elem_t* O;
  float* ws_o;
  float* ws_lse;
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
                  float scale, int Hkv, int diag, int win_left, int win_right) {
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
