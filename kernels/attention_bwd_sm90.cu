// evo: the Hopper backward template (sm_90a, wgmma): FlashAttention-3's backward design,
// driven by integer `-D EVO_*` macros (kernels/ABI.md, "The backward ABI" and "The Hopper
// backward template"). The host compiles kernels/mask.cuh, kernels/mma.cuh (the element
// type, conversions, ex2), kernels/sm90.cuh (the PTX wrappers it shares with the Hopper
// forward), this file, kernels/attention_bwd_common.cuh,
// kernels/attention_bwd_sm90_wgmma.cuh and kernels/attention_bwd_sm90_kernel.cuh as one
// program named after this file:
//
//   1. configuration   macros -> constexpr, validity static_asserts, shared-memory plans
//   2. exp, staging    the score exponential; the swizzled tile layout, cp.async copies
//                      of tiles and of lse / dpsum
//   3. pre and post    kernels/attention_bwd_common.cuh (shared with the Ampere
//                      backward): the ABI constants, the workspace, dpsum = rowsum(dO * O),
//                      the dQ accumulator zeroed / converted
//   4. wgmma           kernels/attention_bwd_sm90_wgmma.cuh (generated)
//   5. main, dq        kernels/attention_bwd_sm90_kernel.cuh
//
// The design (kernels/NOTES.md, "The Hopper backward"): a main CTA owns BLOCK_N keys of
// one K/V head, 64 per consumer warpgroup (or, with EVO_DKV_COLUMNS, 64 per pair of
// warpgroups, each holding half the columns of their dK and dV: FlashAttention-3's D256
// split); K and V stay in shared memory, dK and dV in the warpgroups' registers. A producer warpgroup streams the query blocks that see
// those keys (Q, dO, lse, dpsum) through a ring of STAGES mbarrier-guarded buffers with
// cp.async, each stage complete when its copies land (cp.async.mbarrier.arrive.noinc).
// Per query block each consumer warpgroup computes S^T = K Q^T and
// dP^T = V dO^T (wgmma, keys as M), P^T and dS^T in registers, dV += P^T dO and
// dK += dS^T Q (wgmma with P^T / dS^T as the register A operand), leaves dS^T in shared
// memory, and after a barrier of the consumers computes its share of dQ = dS K (wgmma,
// both operands transposed from shared memory), added into the fp32 accumulator in the
// workspace (red atomics, or bulk reduce-adds from shared memory), which post converts.
// NVRTC only: no std headers.

#ifndef EVO_DQ_BULK
#define EVO_DQ_BULK 0
#endif
#ifndef EVO_DKV_COLUMNS
#define EVO_DKV_COLUMNS 0
#endif
// Measurement only, never set by the host (results are wrong with it): bit 1 skips the
// dQ accumulator adds, bit 2 the whole dQ step (dS^T store, barrier, wgmma, adds), bit
// 4 the producer's reloads after the first round of stages, bit 8 the rotation of the
// query blocks' order (kernels/NOTES.md, "The Hopper backward", has the numbers).
#ifndef EVO_BENCH_SKIP
#define EVO_BENCH_SKIP 0
#endif
// ============================================================ 1. configuration

namespace evo {

constexpr int kD = EVO_HEAD_DIM;
constexpr int kWgs = EVO_CONSUMER_WGS;  // consumer warpgroups of main
// Warpgroups per 64 keys (dkv_split): 1, each owns its keys' dK and dV over every column;
// 2 (EVO_DKV_COLUMNS), a pair shares 64 keys, each computes S^T and dP^T for half the
// step's query rows, leaves P^T and dS^T in shared memory, and holds dK and dV of half
// the columns (kernels/NOTES.md §18, "D256").
constexpr int kSplit = EVO_DKV_COLUMNS ? 2 : 1;
constexpr int kBN = EVO_BLOCK_N;        // keys per main CTA (= 64 x kWgs / kSplit)
constexpr int kBM = EVO_BLOCK_M;        // query rows per step of main's loop
constexpr int kStages = EVO_STAGES;     // main: Q/dO ring; dq kernel: K/V ring
constexpr int kThreads = 128 * (kWgs + 1);  // + the producer warpgroup
constexpr bool kDqSeparate = EVO_DQ_SEPARATE != 0;
constexpr bool kDqBulk = EVO_DQ_BULK != 0 && !kDqSeparate;
// Main computes dQ (not the dq kernel, nor the measurement probe without it); with the
// bulk adds it issues dK after its first dQ unit (section 5).
constexpr bool kDqHere = !kDqSeparate && !(EVO_BENCH_SKIP & 2);
constexpr bool kDkLate = kDqHere && kDqBulk;
// P^T and dS^T go through shared memory for dV and dK (the split warpgroups each need
// the pair's whole step); dS^T is stored there for dQ as well.
constexpr bool kPSmem = kSplit > 1;
constexpr bool kDsSmem = kDqHere || kPSmem;

// Tiles are stored as ceil(D / 64) column blocks of [rows][64] elements, 128 bytes a
// row, 16-byte chunks XOR-swizzled with (row % 8): the layout wgmma's 128-byte-swizzle
// descriptors read (the forward's, kernels/attention_sm90.cu). Each block starts on a
// 1024-byte boundary. D96 is stored 128 columns wide; the pad columns 96..127 are never
// written: S^T and dP^T run over the real columns only, and the transposed reads of Q,
// dO and K (dK, dV, dQ's N) put the pad only into output columns that are never stored.
constexpr int kRowBytes = 128;
constexpr int kColBlocks = (kD + 63) / 64;
constexpr int kDs = kColBlocks * 64;
constexpr int kTileK = kBN * kDs * 2;   // one K (or V) tile of main
constexpr int kTileQ = kBM * kDs * 2;   // one Q (or dO) stage of main
constexpr int kSN = kBM / kSplit;       // query columns of a warpgroup's S^T and dP^T
constexpr int kDsW = kDs / kSplit;      // columns of dK and dV a warpgroup holds
// dS^T [BM/64 query blocks][BN keys][64 queries], two buffers (query blocks in turn);
// P^T likewise with EVO_DKV_COLUMNS.
constexpr int kDsBytes = kBM * kBN * 2;
// dQ = dS K in units of 64 query rows x 64 columns, round robin over the warpgroups.
constexpr int kDqUnits = (kBM / 64) * kColBlocks;
// Bulk reduce (EVO_DQ_BULK): the accumulator is laid out in units of 64 query rows x 64
// columns, each contiguous (kernels/attention_bwd_common.cuh, dq_acc_at); a warpgroup
// stages its unit in that layout and one of its threads adds the whole unit into the
// accumulator with one cp.reduce.async.bulk. A warpgroup stages at most kDqSlots units
// an item, each in a slot of its own.
constexpr int kDqSlots = (kDqUnits + kWgs - 1) / kWgs;
constexpr int kDqUnitBytes = 64 * 64 * 4;
constexpr int kDqStageBytes = kDqBulk ? kWgs * kDqSlots * kDqUnitBytes : 0;
constexpr int kStatsBytes = kStages * 2 * kBM * 4;  // lse, dpsum per stage
constexpr int kBarrierBytes = 256;
constexpr int kAlignSlack = 1024;

// Main's plan (bytes; must equal the host's EVO_SMEM_BYTES), in this order:
// slack | K | V | STAGES x Q | STAGES x dO | 2 x dS^T | 2 x P^T | dQ staging | stats |
// barriers.
constexpr int kOffK = 0;
constexpr int kOffV = kOffK + kTileK;
constexpr int kOffQ = kOffV + kTileK;
constexpr int kOffDo = kOffQ + kStages * kTileQ;
constexpr int kOffDs = kOffDo + kStages * kTileQ;
constexpr int kOffP = kOffDs + (!kDqSeparate || kPSmem ? 2 * kDsBytes : 0);
constexpr int kOffDqStage = kOffP + (kPSmem ? 2 * kDsBytes : 0);
constexpr int kOffStats = kOffDqStage + kDqStageBytes;
constexpr int kOffBars = kOffStats + kStatsBytes;
constexpr int kMainSmem = kAlignSlack + kOffBars + kBarrierBytes;

// The dq kernel (EVO_DQ_SEPARATE): 64 query rows per consumer warpgroup, K/V tiles of 64
// keys through a ring of STAGES. Plan: slack | Q | dO | STAGES x K | STAGES x V | stats
// | barriers.
constexpr int kDqBM = 64 * kWgs;
constexpr int kDqBN = 64;
constexpr int kDqTileQ = kDqBM * kDs * 2;
constexpr int kDqTileK = kDqBN * kDs * 2;
constexpr int kDqOffQ = 0;
constexpr int kDqOffDo = kDqOffQ + kDqTileQ;
constexpr int kDqOffK = kDqOffDo + kDqTileQ;
constexpr int kDqOffV = kDqOffK + kStages * kDqTileK;
constexpr int kDqOffStats = kDqOffV + kStages * kDqTileK;
constexpr int kDqOffBars = kDqOffStats + 2 * kDqBM * 4;
constexpr int kDqSmem = kDqSeparate ? kAlignSlack + kDqOffBars + kBarrierBytes : 0;
// The dq kernel's query rows per CTA, the launch geometry's block_m
// (kernels/attention_bwd_common.cuh).
__host__ __device__ constexpr int dq_rows() { return kDqBM; }

// pre / post (kernels/attention_bwd_common.cuh): one warp per row, 4 rows per block.
constexpr int kRowsPerBlock = 4;
constexpr int kRowThreads = kRowsPerBlock * 32;

// setmaxnreg (the forward's rule, kernels/NOTES.md §3): every thread holds the launch
// bound's share; the consumers may take only what the producer gives up.
constexpr int kProducerRegs = EVO_PRODUCER_REGS;
constexpr int kLaunchRegs0 = 65536 / kThreads / 8 * 8;
constexpr int kLaunchRegs = kLaunchRegs0 > 256 ? 256 : kLaunchRegs0;
constexpr int kConsumerRegs0 = ((kLaunchRegs * (kWgs + 1) - kProducerRegs) / kWgs) / 8 * 8;
constexpr int kConsumerRegs = kConsumerRegs0 > 240 ? 240 : kConsumerRegs0;

static_assert(kD == 64 || kD == 96 || kD == 128 || kD == 256,
              "EVO_HEAD_DIM must be 64, 96, 128 or 256");
static_assert(kWgs >= 1 && kWgs <= 3, "EVO_CONSUMER_WGS must be 1, 2 or 3");
static_assert(EVO_DKV_COLUMNS == 0 || EVO_DKV_COLUMNS == 1, "EVO_DKV_COLUMNS must be 0 or 1");
static_assert(kBN * kSplit == 64 * kWgs,
              "rule hopper_bwd_block_n: 64 keys per consumer warpgroup (per pair with "
              "EVO_DKV_COLUMNS), EVO_BLOCK_N == 64 * EVO_CONSUMER_WGS / (1 + EVO_DKV_COLUMNS)");
static_assert(kSplit == 1 || kWgs == 2,
              "rule hopper_bwd_dkv_pairs: EVO_DKV_COLUMNS pairs the warpgroups: "
              "EVO_CONSUMER_WGS must be 2");
static_assert(kSplit == 1 || kDs % 128 == 0,
              "rule hopper_bwd_dkv_columns: EVO_DKV_COLUMNS needs each half of the columns "
              "to be whole 64-column blocks (D = 96, 128 or 256)");
static_assert(kBM == 64 || kBM == 128,
              "EVO_BLOCK_M must be 64 or 128 (the N of S^T's wgmma, whole 64-row dQ units; "
              "192 never fits the registers)");
static_assert(kStages >= 1 && kStages <= 4, "EVO_STAGES must be 1..4");
static_assert(EVO_EXP2 == 0 || EVO_EXP2 == 1, "EVO_EXP2 must be 0 (expf) or 1 (exp2)");
static_assert(kProducerRegs == 0 || kProducerRegs == 24 || kProducerRegs == 32 ||
                  kProducerRegs == 40,
              "EVO_PRODUCER_REGS must be 0 (no setmaxnreg), 24, 32 or 40");
static_assert(kProducerRegs == 0 ||
                  kProducerRegs + kWgs * kConsumerRegs <= kLaunchRegs * (kWgs + 1),
              "setmaxnreg: the consumers would wait for registers the producer never frees");
// Registers a consumer thread holds at its peak: dK and dV (kDsW / 2 each), S^T and dP^T
// (kSN / 2 each; S^T turns into P^T's 16-bit fragments, kSN / 4), plus ~8 of addressing.
static_assert(kDsW + kSN + kSN / 4 + 8 <= (kProducerRegs ? kConsumerRegs : kLaunchRegs),
              "rule hopper_bwd_regs: dK, dV, S^T, dP^T and their fragments do not fit the "
              "consumers' registers: lower EVO_BLOCK_M or raise the registers (producer_regs)");
static_assert(kMainSmem == EVO_SMEM_BYTES,
              "shared-memory plan mismatch: main's layout differs from the host's "
              "EVO_SMEM_BYTES (formula in kernels/ABI.md, \"The Hopper backward template\")");
static_assert(kDqSmem == EVO_DQ_SMEM_BYTES,
              "shared-memory plan mismatch: the dq kernel's layout differs from the host's "
              "EVO_DQ_SMEM_BYTES (0 with dq_mode = atomic; kernels/ABI.md)");
static_assert(kMainSmem <= 232448 && kDqSmem <= 232448,
              "shared memory above the 227 KiB a CTA may have: lower EVO_STAGES or the tiles");

// ============================================================ 2. exp and staging

// e^(s * scale - lse) of a raw score s as exp2 of one FFMA (EVO_EXP2 1: scale * log2 e
// and lse * log2 e folded in) or expf; lse = +inf (a row that sees no key) gives 0.
#if EVO_EXP2
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float score_exp(float x) { return ex2_approx(x); }
#else
constexpr float kLog2e = 1.0f;
__device__ __forceinline__ float score_exp(float x) { return __expf(x); }
#endif

// The byte offset of element (row, col) in a swizzled tile of `rows` rows.
__device__ __forceinline__ uint32_t swz(int rows, int row, int col) {
  return (col / 64) * rows * kRowBytes + row * kRowBytes +
         ((((col % 64) / 8) ^ (row % 8)) * 16) + (col % 8) * 2;
}

// Copies rows [row0, row0 + ROWS) of one head's [L, D] matrix into the swizzled layout
// at `dst` with the 128 threads of a warpgroup (`tid` 0..127); rows at or past L are
// zero-filled (cp.async, one group per call site's commit).
template <int ROWS, int THREADS = 128>
__device__ __forceinline__ void copy_tile(uint32_t dst, const elem_t* head, int row0, int L,
                                          int tid) {
  constexpr int kChunks = ROWS * kD / 8;  // 16-byte chunks
#pragma unroll 4
  for (int c = tid; c < kChunks; c += THREADS) {
    const int row = c / (kD / 8), chunk = c % (kD / 8);
    const uint32_t to = dst + swz(ROWS, row, chunk * 8);
    const bool ok = row0 + row < L;
    cp_async16(to, head + (size_t)(ok ? row0 + row : 0) * kD + chunk * 8, ok);
  }
}
// ROWS floats of a row vector (lse or dpsum) from row0, zeros past L.
template <int ROWS, int THREADS = 128>
__device__ __forceinline__ void copy_vec(uint32_t dst, const float* head, int row0, int L,
                                         int tid) {
  for (int r = tid; r < ROWS; r += THREADS) {
    const bool ok = row0 + r < L;
    cp_async4(dst + r * 4, head + (ok ? row0 + r : 0), ok);
  }
}

}  // namespace evo

// Section 3, the ABI constants and the pre and post kernels:
// kernels/attention_bwd_common.cuh; section 4, the wgmma wrappers:
// kernels/attention_bwd_sm90_wgmma.cuh; section 5, the main and dq kernels:
// kernels/attention_bwd_sm90_kernel.cuh (appended in that order by the host).
