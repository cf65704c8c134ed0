// The Hopper (sm_90a) PTX building blocks that do not depend on a template's tile sizes:
// mbarriers, cp.async, bulk copies, proxy fences, wgmma's fence / commit / wait,
// setmaxnreg, named barriers and the shared-memory matrix descriptor. The host prepends
// this file (after kernels/mask.cuh and kernels/mma.cuh, whose element type, conversions
// and smem_addr it uses) to both Hopper templates, the forward (kernels/attention_sm90.cu)
// and the backward (kernels/attention_bwd_sm90.cu), so each wrapper exists once.
// NVRTC only: no std headers.

// The wgmma instructions' operand type (the generated wrappers splice it into PTX).
#define EVO_WG_TYPE EVO_MMA_TYPE

typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

namespace evo {

// ------------------------------------------------------------ mbarriers

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
// so waiting for parity 1 returns at once (a producer's first pass over its ring).
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

// A named barrier of `threads` threads (ids 1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ------------------------------------------------------------ copies

// 16 bytes (a tile chunk) or 4 bytes (an lse / dpsum value) into shared memory; src-size
// 0 zero-fills without reading (rows past L).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool in_bounds) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(in_bounds ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool in_bounds) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src),
               "r"(in_bounds ? 4 : 0)
               : "memory");
}
// An arrival on `bar` once every cp.async this thread issued before it has completed
// (.noinc: it is one of the barrier's expected arrivals, not an added one).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Generic-proxy writes (st.shared, cp.async) that wgmma or a bulk copy reads next must
// be made visible to the async proxy by the writing thread before it signals.
__device__ __forceinline__ void fence_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// `bytes` of fp32 at `src` (shared) added element-wise into `dst` (global) by the copy
// engine, as a bulk group of this thread.
__device__ __forceinline__ void bulk_reduce_add(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
      "r"(src), "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until this thread's bulk groups but the newest N have read their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Waits until this thread's bulk groups are complete (their writes done).
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// ------------------------------------------------------------ wgmma and registers

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
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

// A shared-memory matrix descriptor with the 128-byte swizzle: start address,
// leading-byte offset and stride-byte offset, each in 16-byte units.
//  K-major: rows of 128 bytes, 8-row atoms 1024 bytes apart (SBO); LBO unused.
//  MN-major (read transposed): 64 M/N-elements per 128-byte row, 8 k-rows per atom,
//  atoms along k 1024 bytes apart (SBO), the next 64 M/N-elements at LBO.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

}  // namespace evo
