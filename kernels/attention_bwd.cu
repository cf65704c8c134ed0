// evo: the Ampere backward template (family ampere_bwd): FlashAttention-2's backward on
// mma.sync m16n8k16 + ldmatrix, driven by integer `-D EVO_*` macros (kernels/ABI.md,
// "The backward ABI"). The host compiles kernels/mask.cuh, kernels/mma.cuh, this file,
// kernels/attention_bwd_common.cuh and kernels/attention_bwd_kernel.cuh as one program
// named after this file:
//
//   1. configuration   macros -> constexpr, validity static_asserts, shared-memory plans
//   2. staging         global -> shared tiles (direct or cp.async, any layout/width)
//   3. pre and post    kernels/attention_bwd_common.cuh (shared with the Hopper backward):
//                      the ABI constants, the workspace, dpsum = rowsum(dO * O), the dQ
//                      accumulator zeroed / converted
//   4. main, dq        kernels/attention_bwd_kernel.cuh
//
// The design (kernels/NOTES.md, "The Ampere backward"): a main CTA owns BLOCK_N keys of
// one K/V head, keeps K and V in shared memory and dK, dV in registers, and streams the
// query blocks of the head's query heads that see its keys; dQ is added into an fp32
// accumulator with atomics (post converts it), or computed by a dq kernel of its own.

#ifndef EVO_MAX_REGS
#define EVO_MAX_REGS 0
#endif

// ============================================================ 1. configuration

namespace evo {

constexpr int kD = EVO_HEAD_DIM;
constexpr int kBN = EVO_BLOCK_N;      // keys per main CTA (K/V tiles of the dq kernel)
constexpr int kBM = EVO_BLOCK_M;      // query rows per step of main (per CTA of dq)
constexpr int kWarps = EVO_WARPS;
constexpr int kThreads = kWarps * 32;
constexpr int kStages = EVO_STAGES;
constexpr int kVec = EVO_VEC_BYTES;
constexpr bool kAsync = EVO_CP_ASYNC != 0;
constexpr bool kDqSeparate = EVO_DQ_SEPARATE != 0;

constexpr int kPadded = 1;  // EVO_SMEM_LAYOUT: 0 plain, 1 padded, 2 swizzled
constexpr int kPitch = kD + (EVO_SMEM_LAYOUT == kPadded ? 8 : 0);
// dS^T, [BLOCK_N][BLOCK_M + 8]: 16 bytes of pad put the 8 rows an ldmatrix reads in 8
// different bank groups for every BLOCK_M (row pitch 48, 80, 144 or 272 bytes).
constexpr int kDsPitch = kBM + 8;

// main: warp w owns keys [w * kWarpKeys, (w + 1) * kWarpKeys), kKeySlices m16 slices.
constexpr int kWarpKeys = kBN / kWarps;
constexpr int kKeySlices = kWarpKeys / 16;
// dq kernel: warp w owns query rows [w * kWarpRows, ...), kRowSlices m16 slices.
#if EVO_DQ_SEPARATE
constexpr int kWarpRows = kBM / kWarps;
constexpr int kRowSlices = kWarpRows / 16;
#endif

// Shared-memory plan of main (bytes; must equal the host's EVO_SMEM_BYTES):
// K, V | STAGES x (Q, dO) | STAGES x (lse, dpsum) | dS^T.
__host__ __device__ constexpr int tile_bytes(int rows) { return rows * kPitch * 2; }
constexpr int kMainKOff = 0;
constexpr int kMainVOff = kMainKOff + tile_bytes(kBN);
constexpr int kMainQOff = kMainVOff + tile_bytes(kBN);             // stage s: Q, then dO
constexpr int kMainStageBytes = 2 * tile_bytes(kBM);
constexpr int kMainStatsOff = kMainQOff + kStages * kMainStageBytes;  // stage s: lse, dpsum
constexpr int kMainDsOff = kMainStatsOff + kStages * 2 * kBM * 4;
constexpr int kMainSmem = kMainDsOff + kBN * kDsPitch * 2;

// Shared-memory plan of the dq kernel (EVO_DQ_SMEM_BYTES; 0 without one):
// Q, dO | STAGES x (K, V) | lse, dpsum.
constexpr int kDqQOff = 0;
constexpr int kDqDoOff = kDqQOff + tile_bytes(kBM);
constexpr int kDqKvOff = kDqDoOff + tile_bytes(kBM);               // stage s: K, then V
constexpr int kDqStageBytes = 2 * tile_bytes(kBN);
constexpr int kDqStatsOff = kDqKvOff + kStages * kDqStageBytes;
constexpr int kDqSmem = kDqSeparate ? kDqStatsOff + 2 * kBM * 4 : 0;
// The dq kernel's query rows per CTA (the launch geometry's block_m): main's step. A
// function, not a constant: NVRTC emits every namespace-scope constant into the CUBIN.
__host__ __device__ constexpr int dq_rows() { return kBM; }

// pre / post (kernels/attention_bwd_common.cuh): one warp per row, 4 rows per block.
constexpr int kRowsPerBlock = 4;
constexpr int kRowThreads = kRowsPerBlock * 32;

// Registers per thread that EVO_MIN_BLOCKS resident CTAs leave (the register file is
// four 16K quarters, one per warp scheduler; the fullest holds ceil(warps / 4)), and the
// cap (kernels/ABI.md, "Register cap"), the same rule as the forward template.
constexpr int kResidentWarps = kWarps * EVO_MIN_BLOCKS;
constexpr int kMinBlocksRegs = (16384 / ((kResidentWarps + 3) / 4 * 32)) / 8 * 8;
constexpr int kRegCap0 = EVO_MAX_REGS < kMinBlocksRegs ? EVO_MAX_REGS : kMinBlocksRegs;
constexpr int kRegCap = kRegCap0 > 255 ? 255 : kRegCap0;

static_assert(kD == 64 || kD == 96 || kD == 128 || kD == 256,
              "EVO_HEAD_DIM must be 64, 96, 128 or 256");
static_assert(kBN % 16 == 0 && kBN >= 16 && kBN <= 256,
              "EVO_BLOCK_N must be a multiple of 16 up to 256 (m16 key slices, k16 steps)");
static_assert(kBM == 16 || kBM == 32 || kBM == 64 || kBM == 128,
              "EVO_BLOCK_M must be 16, 32, 64 or 128");
static_assert(kWarps == 1 || kWarps == 2 || kWarps == 4 || kWarps == 8,
              "EVO_WARPS must be 1, 2, 4 or 8");
static_assert(kStages >= 1 && kStages <= 4, "EVO_STAGES must be 1..4");
static_assert(kVec == 4 || kVec == 8 || kVec == 16, "EVO_VEC_BYTES must be 4, 8 or 16");
static_assert(EVO_SMEM_LAYOUT >= 0 && EVO_SMEM_LAYOUT <= 2,
              "EVO_SMEM_LAYOUT must be 0 (plain), 1 (padded) or 2 (swizzled)");
static_assert(EVO_EXP2 >= 0 && EVO_EXP2 <= 2,
              "EVO_EXP2 must be 0 (expf), 1 (exp2) or 2 (exp2 with every other by polynomial)");
static_assert(EVO_MIN_BLOCKS >= 1 && EVO_MIN_BLOCKS <= 4, "EVO_MIN_BLOCKS must be 1..4");
static_assert(EVO_MAX_REGS == 0 || kRegCap >= 24, "EVO_MAX_REGS too small to compile the kernel");
static_assert(kBN % (16 * kWarps) == 0,
              "rule bwd_warp_keys: main's warps own whole m16 slices of keys, "
              "BLOCK_N % (16*WARPS) == 0");
static_assert(!kDqSeparate || kBM % (16 * kWarps) == 0,
              "rule bwd_dq_warp_rows: the dq kernel's warps own whole m16 slices of query "
              "rows, BLOCK_M % (16*WARPS) == 0 with dq_mode = separate");
static_assert(kMainSmem == EVO_SMEM_BYTES,
              "shared-memory plan mismatch: main's layout differs from the host's "
              "EVO_SMEM_BYTES (formula in kernels/ABI.md, \"The backward ABI\")");
static_assert(kDqSmem == EVO_DQ_SMEM_BYTES,
              "shared-memory plan mismatch: the dq kernel's layout differs from the host's "
              "EVO_DQ_SMEM_BYTES (0 with dq_mode = atomic; kernels/ABI.md)");

// ============================================================ 2. staging

__device__ __forceinline__ int tile_off(int row, int col) {
  return tile_offset<kD, kPitch, EVO_SMEM_LAYOUT>(row, col);
}

__device__ __forceinline__ void cp_async_commit() {
  if constexpr (kAsync) asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  if constexpr (kAsync) asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Rows [row0, row0 + ROWS) of a [L][D] matrix into a shared tile, EVO_VEC_BYTES a step
// over the kThreads threads; rows >= L become zeros (padding keys score 0 before the
// mask, padding query rows carry zero Q and dO and so add nothing to dK, dV).
template <int ROWS>
__device__ __forceinline__ void load_tile(elem_t* tile, const elem_t* __restrict__ g, int row0,
                                          int L, int tid) {
  typedef typename VecOf<kVec>::type vec_t;
  constexpr int kElems = kVec / 2;
  constexpr int kChunksPerRow = kD / kElems;
  constexpr int kTotal = ROWS * kChunksPerRow;
  constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll 4
  for (int it = 0; it < kIters; ++it) {
    const int idx = tid + it * kThreads;
    if (kTotal % kThreads != 0 && idx >= kTotal) break;
    const int r = idx / kChunksPerRow, c = (idx % kChunksPerRow) * kElems;
    const bool valid = row0 + r < L;
    // An invalid row still needs a legal address: row 0 of this head.
    const elem_t* src = g + (size_t)(valid ? row0 + r : 0) * kD + c;
    elem_t* dst = tile + tile_off(r, c);
    if constexpr (kAsync) {
      cp_async<kVec>(dst, src, valid);
    } else {
      vec_t v = vec_t();
      if (valid) v = *reinterpret_cast<const vec_t*>(src);
      *reinterpret_cast<vec_t*>(dst) = v;
    }
  }
}

// ROWS floats of a row vector (lse or dpsum) from index row0, zeros past L.
template <int ROWS>
__device__ __forceinline__ void load_vec(float* dst, const float* __restrict__ g, int row0, int L,
                                         int tid) {
  for (int r = tid; r < ROWS; r += kThreads) {
    const bool valid = row0 + r < L;
    if constexpr (kAsync) {
      cp_async<4>(dst + r, g + (valid ? row0 + r : 0), valid);
    } else {
      dst[r] = valid ? g[row0 + r] : 0.0f;
    }
  }
}

// The score exponential P = e^(s * scale - lse) of a raw score s, with c.x and c.y from
// exp_consts: exp2 of one FFMA (EVO_EXP2 1, 2: scale * log2 e and lse * log2 e folded
// in), the odd columns by the polynomial with EVO_EXP2 2. lse = +inf (a row that sees
// no key) gives 0.
__device__ __forceinline__ float2 exp_consts(float scale, float lse) {
#if EVO_EXP2
  return make_float2(scale * 1.4426950408889634f, lse * 1.4426950408889634f);
#else
  return make_float2(scale, lse);
#endif
}
template <int ODD>
__device__ __forceinline__ float score_exp(float s, float sl, float lse_l) {
  const float x = fmaf(s, sl, -lse_l);
#if EVO_EXP2 == 2
  return ODD ? ex2_poly(x) : ex2_approx(x);
#elif EVO_EXP2 == 1
  return ex2_approx(x);
#else
  return __expf(x);
#endif
}

}  // namespace evo

// Section 3, the ABI constants and the pre and post kernels:
// kernels/attention_bwd_common.cuh; section 4, the main and dq kernels:
// kernels/attention_bwd_kernel.cuh (appended in that order by the host).
