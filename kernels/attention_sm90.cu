// evo: the Hopper (sm_90a) family of the FlashAttention-style forward template.
//
// The Ampere template (attention.cu) computes with mma.sync, one warp at a time.
// This file is the design FlashAttention-3 and ThunderKittens use on Hopper:
//
//   * warp specialisation: warpgroup 0 is the producer, it only moves Q, K and V
//     into shared memory; warpgroups 1..EVO_CONSUMER_WGS are consumers, each owns
//     64 query rows and computes with wgmma;
//   * K/V staging through a ring of EVO_STAGES shared-memory stages guarded by
//     mbarriers (full: the tile has landed; empty: every consumer is done with it),
//     filled by the copy engine (TMA, cp.async.bulk.tensor, tensor maps passed as
//     __grid_constant__ parameters), by cp.async, or by plain loads;
//   * S = Q K^T with wgmma, both operands from 128-byte-swizzled shared memory;
//     P stays in registers and is the A operand of O += P V (the accumulator of
//     an m64nN wgmma has mma.sync's C layout per warp, so S's registers, paired
//     and converted to 16 bits, are exactly P's A fragments); O in registers;
//   * setmaxnreg moves registers from the producer to the consumers;
//   * head dims 64, 96, 128 and 256: tiles are stored in 64-column blocks, D96 as two
//     blocks whose last 32 columns are a zero pad (section 1 says how each stage
//     treats it); D256's O is 128 fp32 registers per consumer thread, so only small
//     BLOCK_N fit (FlashAttention-3: 128 x 80), which the host's register rule decides;
//   * optionally (EVO_PERSISTENT) a persistent grid: one CTA per SM loops over the
//     (query block, head, split) tiles, in order for non-causal problems and
//     longest first for causal ones; the producer loads the next tile's Q and K/V
//     while the consumers finish the current tile, whose O has its own staging.
//
// Sections, in the order the data flows:
//   1. configuration     macros -> constexpr, checks, the shared-memory plan
//   2. PTX wrappers      mbarrier, TMA, cp.async, fences, setmaxnreg
//   3. wgmma             descriptors and the generated m64nNk16 wrappers
//   4. the producer      Q once, then K and V tile by tile into the stage ring
//   5. the consumers     S = Q K^T, online softmax, O += P V, epilogue
//   6. the scheduler     which tile a CTA computes, and its K/V range
//   7. the kernels       evo_attention_fwd, evo_attention_combine
//
// The launch contract is kernels/ABI.md's, plus its "tensor maps" section when
// EVO_KV_LOAD is 2 (TMA). NVRTC only: no std headers.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// ============================================================ 1. configuration

#if EVO_BF16
typedef __nv_bfloat16 elem_t;
typedef __nv_bfloat162 elem2_t;
#define EVO_WG_TYPE "bf16"
#else
typedef __half elem_t;
typedef __half2 elem2_t;
#define EVO_WG_TYPE "f16"
#endif

typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

namespace evo {

constexpr int kD = EVO_HEAD_DIM;
constexpr int kBN = EVO_BLOCK_N;
constexpr int kWgs = EVO_CONSUMER_WGS;        // consumer warpgroups, 64 query rows each
constexpr int kBM = 64 * kWgs;
constexpr int kThreads = 128 * (kWgs + 1);    // + the producer warpgroup
constexpr int kStages = EVO_STAGES;
constexpr int kSplit = EVO_SPLIT_KV;
constexpr int kCpAsync = 1, kTma = 2;  // EVO_KV_LOAD (0: plain loads)
constexpr int kLoad = EVO_KV_LOAD;
constexpr bool kPersistent = EVO_PERSISTENT != 0;
// EVO_OVERLAP: 0 none, 1 within a tile, 2 chained across a persistent CTA's tiles.
constexpr bool kChained = EVO_OVERLAP == 2;
// EVO_CLUSTER_COMBINE: a query block's splits are one cluster and merge in distributed
// shared memory (kernels/cluster.cuh) instead of the combine kernel.
constexpr bool kCluster = EVO_CLUSTER_COMBINE != 0;

// Producer / consumer registers under setmaxnreg (0: no reallocation). At launch every
// thread holds kLaunchRegs (the launch bounds' share of the 64K register file, rounded
// down to 8; ptxas gives a setmaxnreg kernel exactly that). setmaxnreg moves registers
// only inside the CTA's allocation, and setmaxnreg.inc waits until the registers it asks
// for are free: the consumers may take only what the producer gives up, or they wait
// forever. So they get (allocation - producer) / warpgroups, rounded down to 8, capped at
// 240: 2 consumer warpgroups with a 24-register producer -> (504 - 24) / 2 = 240, with a
// 32-register producer -> 232 (not 240: that asks for 16 x 128 registers nobody freed),
// 3 -> 160 (FlashAttention-3's split).
constexpr int kProducerRegs = EVO_PRODUCER_REGS;
constexpr int kLaunchRegs = 65536 / (128 * (kWgs + 1)) / 8 * 8 > 256 ? 256 : 65536 / (128 * (kWgs + 1)) / 8 * 8;
constexpr int kConsumerRegs0 = ((kLaunchRegs * (kWgs + 1) - kProducerRegs) / kWgs) / 8 * 8;
constexpr int kConsumerRegs = kConsumerRegs0 > 240 ? 240 : kConsumerRegs0;
static_assert(kProducerRegs == 0 || kProducerRegs + kWgs * kConsumerRegs <= kLaunchRegs * (kWgs + 1),
              "setmaxnreg: the consumers would wait for registers the producer never frees");

static_assert(kD == 64 || kD == 96 || kD == 128 || kD == 256,
              "EVO_HEAD_DIM must be 64, 96, 128 or 256");
static_assert(kBN % 16 == 0 && kBN >= 16 && kBN <= 256,
              "EVO_BLOCK_N must be a multiple of 16 up to 256 (wgmma N <= 256, P V in k16 steps)");
static_assert(kWgs >= 1 && kWgs <= 3, "EVO_CONSUMER_WGS must be 1, 2 or 3");
static_assert(kStages >= 1 && kStages <= 4, "EVO_STAGES must be 1..4");
static_assert(!EVO_EXP_FMA || EVO_EXP2, "EVO_EXP_FMA computes exp2: it needs EVO_EXP2");
static_assert(kSplit >= 1 && kSplit <= 32 && (kSplit & (kSplit - 1)) == 0,
              "EVO_SPLIT_KV must be 1, 2, 4, 8, 16 or 32");
static_assert(kLoad >= 0 && kLoad <= 2, "EVO_KV_LOAD must be 0 (direct), 1 (cp.async) or 2 (TMA)");
static_assert(EVO_OVERLAP >= 0 && EVO_OVERLAP <= 2, "EVO_OVERLAP must be 0, 1 or 2 (chained)");
static_assert(!kChained || kPersistent,
              "EVO_OVERLAP 2 chains a CTA's tiles: it needs EVO_PERSISTENT (one tile otherwise)");
static_assert(EVO_PINGPONG == 0 || kWgs >= 2,
              "EVO_PINGPONG alternates the GEMMs of two or more consumer warpgroups");
static_assert(kProducerRegs == 0 || kProducerRegs == 24 || kProducerRegs == 32 || kProducerRegs == 40,
              "EVO_PRODUCER_REGS must be 0 (no setmaxnreg), 24, 32 or 40");
static_assert(!kCluster || (kSplit >= 2 && kSplit <= 8),
              "EVO_CLUSTER_COMBINE merges 2 to 8 splits (a portable cluster holds 8 CTAs)");
static_assert(!kCluster || !kChained,
              "EVO_CLUSTER_COMBINE merges after a tile's epilogue, which a chain folds into its stream");

// Shared memory: every tile is stored as ceil(D/64) column blocks of [rows][64]
// elements, 128 bytes per row, 16-byte chunks XOR-swizzled with (row % 8): the layout
// TMA's SWIZZLE_128B writes and wgmma's 128-byte-swizzle descriptors read. Each block
// starts on a 1024-byte boundary (one swizzle atom of 8 rows).
//
// D = 96 is not a multiple of 64: its tiles are stored 128 columns wide (kDs), the
// second block's columns 96..127 a zero pad. TMA's map has a global inner dimension of
// 96, so the second 64-column box of a row runs 32 columns out of bounds and the copy
// engine writes zeros there (its transaction bytes still count the whole box); the
// cp.async and plain-load producers never write the pad, and the kernel zeroes it
// once at the start (zero_pad). S = Q K^T runs D/16 = 6 k16 steps over the real
// columns only; O += P V computes N = 128 (wgmma_rs<128>: an MN-major 128-byte-swizzle
// operand is read in whole 64-column atoms), whose columns 96..127 are V's zero pad
// times P, never rescaled and never stored. Everything in global memory (loads, O,
// the split-KV workspace, the combine) uses the real D.
constexpr int kRowBytes = 128;
constexpr int kColBlocks = (kD + 63) / 64;
constexpr int kDs = kColBlocks * 64;               // stored (and P V's N) columns
constexpr int kQBytes = kBM * kDs * 2;
// A persistent CTA's second Q-sized buffer: O's staging, or chained (EVO_OVERLAP 2) the
// second Q slot, O then staged in the finished tile's slot. Otherwise O reuses Q's rows.
constexpr int kOBytes = kPersistent ? kQBytes : 0;
constexpr int kTileBytes = kBN * kDs * 2;          // one K or one V stage
constexpr int kBarrierBytes = 256;                  // (4 + 4 * stages + wgs) mbarriers, 8 bytes each
constexpr int kAlignSlack = 1024;                   // the dynamic base is aligned up to 1024
// Cluster merge: each consumer warpgroup's exchange, after the barriers; a persistent
// CTA's two, used by its merges in turn (kernels/cluster.cuh says why two suffice).
using Exchange = evo_cluster::Exchange<kD, kSplit>;
constexpr int kExchanges = kPersistent ? 2 : 1;
constexpr int kExchangeBytes = kCluster ? kWgs * kExchanges * Exchange::kBytes : 0;
constexpr int kSmemTotal =
    kAlignSlack + kQBytes + kOBytes + 2 * kStages * kTileBytes + kBarrierBytes + kExchangeBytes;
static_assert((4 + 4 * kStages + 2 * kWgs) * 8 <= kBarrierBytes, "barrier area too small");
static_assert(kD % 16 == 0 && kDs - kD < 64, "tiles are stored as 64-column blocks");
// ptxas checks each wgmma against the launch bound's registers (kLaunchRegs), whatever
// setmaxnreg gives later; O += P V needs O's kDs / 2 accumulators plus ~30 (at D256 it
// asks for 158): D256 cannot run with three consumer warpgroups (128). The host's
// register rule (evo_genome::rules, HOPPER_PV_OPERAND_REGS) says the same.
static_assert(kDs / 2 + 30 <= kLaunchRegs,
              "O += P V's wgmma does not fit the launch bound's registers: lower EVO_CONSUMER_WGS");
static_assert(kSmemTotal == EVO_SMEM_BYTES,
              "shared-memory plan differs from the host's (evo_genome::SmemPlan, Hopper family)");

}  // namespace evo

// The launch geometry (kernels/ABI.md): block_m, threads, dynamic smem bytes, split_kv,
// combine rows per block, combine threads per block.
// The second kernel ABI: K/V heads, the diagonal and the window are arguments.
extern "C" __constant__ int evo_abi[1] = {2};
#define EVO_COMBINE_ROWS 4
#define EVO_COMBINE_THREADS (EVO_COMBINE_ROWS * 32)
// A cluster merge declares no combine (rows and threads 0): the host launches none.
extern "C" __constant__ int evo_geometry[6] = {evo::kBM,
                                               evo::kThreads,
                                               EVO_SMEM_BYTES,
                                               evo::kSplit,
                                               evo::kCluster ? 0 : EVO_COMBINE_ROWS,
                                               evo::kCluster ? 0 : EVO_COMBINE_THREADS};

#if EVO_PACK_GQA
// Packed grouped-query heads (kernels/ABI.md): the host launches one row of heads per
// K/V head, with G x Lq rows each.
extern "C" __constant__ int evo_pack_gqa[1] = {1};
#endif

#if EVO_PERSISTENT
// A persistent kernel (kernels/ABI.md, "Persistent kernels"): the host launches
// min(tiles, SMs x this) CTAs in x, and the kernel loops over the tiles.
extern "C" __constant__ int evo_persistent[1] = {1};
#endif

#if EVO_KV_LOAD == 2
// The tensor maps the host must build (kernels/ABI.md, "Tensor maps"): rows of the Q box,
// rows of the K/V box, elements per box row, swizzle bytes.
extern "C" __constant__ int evo_tensor_maps[4] = {evo::kBM, evo::kBN, 64, 128};
#endif

// A CUtensorMap as the driver encodes it: 128 opaque bytes, 64-byte aligned.
struct __align__(64) TensorMap {
  uint64_t opaque[16];
};

namespace evo {

// ============================================================ 2. PTX wrappers

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Waits until the phase with this parity has completed. A fresh barrier is in phase 0,
// so waiting for parity 1 returns at once (the producer's first pass over the ring).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// One box of a 3-D tensor map (D, L, B*H) into shared memory; completes on `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const TensorMap* map, uint32_t bar, int col,
                                         int row, int bh) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(bh), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool in_bounds) {
  // src-size 0 zero-fills the 16 bytes without reading (rows past L).
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(in_bounds ? 16 : 0)
               : "memory");
}

// Generic-proxy writes (st.shared, cp.async) that wgmma reads next must be made
// visible to the async proxy by the writing thread before it signals the barrier.
__device__ __forceinline__ void fence_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Registers an in-flight wgmma reads or writes must not be touched (or reused) by the
// compiler until the wait: this empty asm "redefines" them after wgmma_wait.
__device__ __forceinline__ void keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void keep(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

__device__ __forceinline__ uint32_t pack(float lo, float hi) {
#if EVO_BF16
  elem2_t v = __floats2bfloat162_rn(lo, hi);
#else
  elem2_t v = __floats2half2_rn(lo, hi);
#endif
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// ============================================================ 3. wgmma

// A shared-memory matrix descriptor with the 128-byte swizzle: start address,
// leading-byte offset and stride-byte offset, each in 16-byte units.
//  K-major (Q, K): rows of 128 bytes, 8-row atoms 1024 bytes apart (SBO); LBO unused.
//  MN-major (V read transposed): 64 N-elements per 128-byte row, 8 k-rows per atom,
//  atoms along k 1024 bytes apart (SBO), the next 64 N-elements at LBO.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

// BEGIN generated by scripts/gen_wgmma.py
// S = Q K^T: A and B from shared memory, both K-major (no transpose).
template <int N> __device__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int acc);
// O += P V: A (P) from registers, B (V) from shared memory, MN-major (transposed).
template <int N> __device__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int acc);
template <> __device__ __forceinline__ void wgmma_ss<16>(float (&d)[8], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<32>(float (&d)[16], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<48>(float (&d)[24], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<64>(float (&d)[32], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<80>(float (&d)[40], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, %40, %41, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<96>(float (&d)[48], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<112>(float (&d)[56], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n112k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55}, %56, %57, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<128>(float (&d)[64], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<144>(float (&d)[72], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n144k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71}, %72, %73, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<160>(float (&d)[80], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, %80, %81, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<176>(float (&d)[88], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<192>(float (&d)[96], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<208>(float (&d)[104], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %106, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n208k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103}, %104, %105, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<224>(float (&d)[112], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %114, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n224k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111}, %112, %113, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<240>(float (&d)[120], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %122, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n240k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119}, %120, %121, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_ss<256>(float (&d)[128], uint64_t a, uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_rs<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_rs<128>(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_rs<256>(float (&d)[128], const uint32_t (&a)[4], uint64_t b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." EVO_WG_TYPE "." EVO_WG_TYPE " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
// END generated by scripts/gen_wgmma.py

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
  uint32_t q, o, k0, v0, bars, exchange;
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
// epilogue only.
struct Finished {
  int wg_row0;
  float m[2], l[2];
};

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
    wg_row0 = w.row0 + cw * 64;
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

#if EVO_EXP2
// One MUFU.EX2: exp2f without fast-math wraps it in denormal scaling, and flushing
// p < 2^-126 to zero is harmless for softmax (ex2(-inf) = +0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define EVO_EXPF ex2
#else
#define EVO_EXPF expf
#endif

// 2^x on the FMA pipe (EVO_EXP_FMA): n = round(x) by the 1.5 * 2^23 trick, 2^(x - n)
// by a degree-3 polynomial on [-0.5, 0.5] (relative error 1.8e-4, under P's 16-bit
// rounding), n added to the exponent bits. The MUFU unit does 16 exponentials per
// clock per SM, as many as the tensor cores need at D64; half of them here runs beside.
__device__ __forceinline__ float ex2_fma(float x) {
  const float t = x + 12582912.0f, f = x - (t - 12582912.0f);
  const float p = fmaf(fmaf(fmaf(0.0546022821f, f, 0.2419248f), f, 0.6933166125f), f, 1.0f);
  const float y = __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
  return x < -126.0f ? 0.0f : y;
}

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
        x = EVO_EXP_FMA && e == 1 ? ex2_fma(fmaf(x, c.score_scale, -m_use))
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
    for (int r = 0; r < 4; ++r) p[kk][r] = pack(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
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

// ============================================================ 7. the kernels

}  // namespace evo

#if EVO_KV_LOAD == 2
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
                      int causal, float scale, int Hkv, int diag, int win_left, int win_right) {
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
    if (kPersistent) zero_pad(sm.o, kBM);
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
      mbar_init(sm.k_empty(s), kWgs * 4);
      mbar_init(sm.v_empty(s), kWgs * 4);
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
    if (kCluster) evo_cluster::wait_all();  // the barrier's phase, before the producer leaves
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
        if (quad == 0) {
#if EVO_EXP2
          const float lse = f.m[i] * 0.6931471805599453f + logf(f.l[i]);
#else
          const float lse = f.m[i] + logf(f.l[i]);
#endif
          ws_lse[at] = f.l[i] > 0.0f ? lse : neg_inf();
        }
      }
      return;
    }
    // O through shared memory, so the global stores are whole 16-byte chunks of a row
    // (the accumulator layout would store 4 bytes per lane, 16 bytes per row segment).
    // The staging keeps the 128-byte swizzle, which also makes these stores
    // conflict-free (a warp's 8 rows fall in 8 different 16-byte slots).
    fence_async_proxy();
    // A persistent warpgroup's threads may still be reading the last tile's O.
    if (kPersistent && !kChained) asm volatile("bar.sync %0, 128;" ::"r"(4 + c.cw) : "memory");
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int lr = warp * 16 + lane / 4 + 8 * i;
      const float inv = f.l[i] > 0.0f ? 1.0f / f.l[i] : 0.0f;
#pragma unroll
      for (int j = 0; j < kD / 8; ++j) {
        const int col = 8 * j + 2 * quad;
        const uint32_t at = o_wg + (col / 64) * kBM * kRowBytes + lr * kRowBytes +
                            ((((col % 64) / 8) ^ (lr % 8)) * 16) + (col % 8) * 2;
        const uint32_t v = pack(o[4 * j + 2 * i] * inv, o[4 * j + 2 * i + 1] * inv);
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(at), "r"(v) : "memory");
      }
    }
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
    const int n_tiles = r.count, t_begin = r.begin;
    const uint32_t q_wg = sm.q + c.cw * 64 * kRowBytes;
    c.begin(w, warp);
    zero_o();
    mbar_wait(sm.q_full(0), q_parity(k));
    // Q is released once the tile's last S = Q K^T has completed.
    auto release_k = [&](int it) {
      arrive(sm.k_empty(stage(kv + it)));
      if (it == n_tiles - 1) arrive(sm.q_empty(0));
    };
    auto release_v = [&](int it) { arrive(sm.v_empty(stage(kv + it))); };
    if (n_tiles == 0) arrive(sm.q_empty(0));
    // A warpgroup with no rows in this block: the loops below without their GEMMs and
    // softmax, keeping the same waits, releases and ping-pong turns in the same order.
    const bool idle = c.wg_row0 >= w.row_end;

#if EVO_OVERLAP
    // Intra-warpgroup overlap (FlashAttention-3): tile j+1's S = Q K^T is issued before
    // tile j's O += P V, and its softmax runs while P V is on the tensor cores.
    Turns turns{c.cw, n_tiles > 0 ? n_tiles + 1 : 0, 0};
    turns.open();
    if (idle) {
      for (int it = 0; it < n_tiles; ++it) {
        mbar_wait(sm.k_full(stage(kv + it)), parity(kv + it));
        turns.begin();
        if (it > 0) mbar_wait(sm.v_full(stage(kv + it - 1)), parity(kv + it - 1));
        turns.end();
        release_k(it);
        if (it > 0) release_v(it - 1);
      }
      if (n_tiles > 0) {
        mbar_wait(sm.v_full(stage(kv + n_tiles - 1)), parity(kv + n_tiles - 1));
        turns.begin();
        turns.end();
        release_v(n_tiles - 1);
      }
    } else {
      if (n_tiles > 0) {
        mbar_wait(sm.k_full(stage(kv)), parity(kv));
        turns.begin();
        issue_qk(sc, q_wg, sm.k(stage(kv)));
        turns.end();
        wgmma_wait<0>();
        keep_s();
        release_k(0);
        softmax(c, sc, t_begin * kBN, alpha);
        to_p(sc, p);
      }
      for (int it = 1; it < n_tiles; ++it) {
        const int n0 = (t_begin + it) * kBN;
        mbar_wait(sm.k_full(stage(kv + it)), parity(kv + it));
        turns.begin();
        issue_qk(sc, q_wg, sm.k(stage(kv + it)));
        rescale(o, alpha);
        mbar_wait(sm.v_full(stage(kv + it - 1)), parity(kv + it - 1));
        issue_pv(o, p, sm.v(stage(kv + it - 1)));
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
        mbar_wait(sm.v_full(stage(kv + last)), parity(kv + last));
        turns.begin();
        issue_pv(o, p, sm.v(stage(kv + last)));
        turns.end();
        wgmma_wait<0>();
        keep_o_p();
        release_v(last);
      }
    }
#else
    // One tile at a time: S = Q K^T, wait, softmax, O += P V, wait.
    Turns turns{c.cw, 2 * n_tiles, 0};
    turns.open();
    for (int it = 0; it < n_tiles && idle; ++it) {
      mbar_wait(sm.k_full(stage(kv + it)), parity(kv + it));
      turns.begin();
      turns.end();
      release_k(it);
      mbar_wait(sm.v_full(stage(kv + it)), parity(kv + it));
      turns.begin();
      turns.end();
      release_v(it);
    }
    for (int it = 0; it < n_tiles && !idle; ++it) {
      const int n0 = (t_begin + it) * kBN;
      mbar_wait(sm.k_full(stage(kv + it)), parity(kv + it));
      turns.begin();
      issue_qk(sc, q_wg, sm.k(stage(kv + it)));
      turns.end();
      wgmma_wait<0>();
      keep_s();
      release_k(it);
      softmax(c, sc, n0, alpha);
      rescale(o, alpha);
      to_p(sc, p);
      mbar_wait(sm.v_full(stage(kv + it)), parity(kv + it));
      turns.begin();
      issue_pv(o, p, sm.v(stage(kv + it)));
      turns.end();
      wgmma_wait<0>();
      keep_o_p();
      release_v(it);
    }
#endif
    kv += n_tiles;
    if (kCluster) {
      // The splits merge in the cluster; each CTA stores its slice of O's columns. The
      // CTAs of a cluster compute the same query block, so a warpgroup with no rows has
      // none in any of them, and their merge counts stay equal.
      if (k == 0) evo_cluster::wait_all();  // the other CTAs' barriers are initialised
      if (!idle) {
        const int b = merges % kExchanges;
        evo_cluster::merge<kD, kSplit, EVO_EXP2 != 0>(
            o, c.m, c.l, sm.exchange_of(c.cw, b), sm.merged(c.cw, b),
            (uint32_t)(merges / kExchanges) & 1, tid,
            [&](int j, int i, float a, float b) {
              const int rr = c.wg_row0 + warp * 16 + lane / 4 + 8 * i;
              if (rr < w.row_end)
                *reinterpret_cast<uint32_t*>(O + ((size_t)w.bh * Lq + rr) * kD + 8 * j +
                                             2 * quad) = pack(a, b);
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
}

// The split-KV combine, evo_attention_combine, is kernels/combine.cuh (appended by the host).
