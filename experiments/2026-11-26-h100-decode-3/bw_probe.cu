// Bandwidth probe for the grouped decode row (B16 H32/8 Lq1 Lk8192 D128 f16): how fast can
// K and V (2 x 268 MB, [128 heads][8192 keys][128] f16) be streamed, and what does the
// rate depend on: CTAs, bytes in flight per CTA, the load instruction, an L2 hint?
// Build: nvcc -O3 -arch=sm_90a -o bw_probe bw_probe.cu -lcuda ; run: ./bw_probe [2d]
// (2d: only the tensor-map ring against the 1D ring of the same bytes, run D3)
#include <cuda.h>
#include <cstring>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(uint64_t* b, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n)); }
__device__ __forceinline__ void mb_expect(uint64_t* b, uint32_t tx) { asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(tx) : "memory"); }
__device__ __forceinline__ void mb_arrive(uint64_t* b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory"); }
__device__ __forceinline__ void mb_wait(uint64_t* b, uint32_t ph) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(sa(b)), "r"(ph) : "memory");
}
__device__ __forceinline__ void bulk(void* dst, const void* src, uint32_t n, uint64_t* b, int hint, uint64_t pol) {
  if (hint)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(sa(dst)), "l"(src), "r"(n), "r"(sa(b)), "l"(pol) : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sa(dst)), "l"(src), "r"(n), "r"(sa(b)) : "memory");
}

// One producer thread (warp 0) streams this CTA's K and V range chunk by chunk into a ring of
// `stages` (K chunk, V chunk) slots; consumer warps 1..3 read 16 bytes a lane of each chunk
// (so the data is used) and release the slot. CTA c: head c / split, part c % split.
// `ways` > 1: the CTA's chunks are visited as `ways` interleaved streams (chunk i is chunk
// i / ways of the (i % ways)-th equal part of its range), run D4.
__global__ void tma_ring(const char* K, const char* V, size_t head_bytes, int split, int chunk, int stages, int hint, unsigned* sink, int ways = 1) {
  extern __shared__ __align__(1024) char smem[];
  uint64_t* full = (uint64_t*)smem;
  uint64_t* empty = full + 16;
  char* ring = smem + 1024;
  int head = blockIdx.x / split, part = blockIdx.x % split;
  size_t bytes = head_bytes / split;
  const char* k = K + head * head_bytes + part * bytes;
  const char* v = V + head * head_bytes + part * bytes;
  int nchunks = (int)(bytes / chunk);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int cw = blockDim.x / 32 - 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) { mb_init(&full[s], 1); mb_init(&empty[s], cw); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  uint64_t pol = 0;
  if (hint) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  if (warp == 0) {
    if (lane == 0)
      for (int i = 0; i < nchunks; ++i) {
        int s = i % stages;
        if (i >= stages) mb_wait(&empty[s], ((i / stages) - 1) & 1);
        mb_expect(&full[s], 2 * chunk);
        size_t c = (size_t)(i % ways) * (nchunks / ways) + i / ways;
        bulk(ring + (size_t)s * 2 * chunk, k + c * chunk, chunk, &full[s], hint, pol);
        bulk(ring + (size_t)s * 2 * chunk + chunk, v + c * chunk, chunk, &full[s], hint, pol);
      }
  } else {
    unsigned acc = 0;
    for (int i = 0; i < nchunks; ++i) {
      int s = i % stages;
      mb_wait(&full[s], (i / stages) & 1);
      const uint4* p = (const uint4*)(ring + (size_t)s * 2 * chunk);
      int n16 = 2 * chunk / 16;
      for (int j = (warp - 1) * 32 + lane; j < n16; j += cw * 32 * 8) { uint4 x = p[j]; acc ^= x.x ^ x.w; }
      __syncwarp();
      if (lane == 0) mb_arrive(&empty[s]);
    }
    if (acc == 0x12345678u) sink[0] = acc;
  }
}

// The same ring, each stage loaded as the Hopper template loads a K or V tile: a 2D tensor
// map over [rows][128] f16 with 128-byte swizzle, one box of 64 columns per
// 64-column block (two boxes per tile at D128), `bn` rows per tile.
__global__ void tma2d_ring(const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv, int keys, int split, int bn, int stages, unsigned* sink) {
  extern __shared__ __align__(1024) char smem[];
  uint64_t* full = (uint64_t*)smem;
  uint64_t* empty = full + 16;
  char* ring = (char*)(((uintptr_t)smem + 1024 + 1023) & ~(uintptr_t)1023);
  int head = blockIdx.x / split, part = blockIdx.x % split;
  int rows = keys / split, row0 = head * keys + part * rows;
  int tile = bn * 256;  // bytes of one K (or V) tile
  int ntiles = rows / bn;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int cw = blockDim.x / 32 - 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) { mb_init(&full[s], 1); mb_init(&empty[s], cw); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    if (lane == 0)
      for (int i = 0; i < ntiles; ++i) {
        int s = i % stages;
        if (i >= stages) mb_wait(&empty[s], ((i / stages) - 1) & 1);
        mb_expect(&full[s], 2 * tile);
        char* dst = ring + (size_t)s * 2 * tile;
        for (int t = 0; t < 2; ++t)
          for (int c = 0; c < 2; ++c)
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         ::"r"(sa(dst + t * tile + c * tile / 2)), "l"((uint64_t)(t ? &tv : &tk)), "r"(c * 64), "r"(row0 + i * bn), "r"(sa(&full[s])) : "memory");
      }
  } else {
    unsigned acc = 0;
    for (int i = 0; i < ntiles; ++i) {
      int s = i % stages;
      mb_wait(&full[s], (i / stages) & 1);
      const uint4* p = (const uint4*)(ring + (size_t)s * 2 * tile);
      int n16 = 2 * tile / 16;
      for (int j = (warp - 1) * 32 + lane; j < n16; j += cw * 32 * 8) { uint4 x = p[j]; acc ^= x.x ^ x.w; }
      __syncwarp();
      if (lane == 0) mb_arrive(&empty[s]);
    }
    if (acc == 0x12345678u) sink[0] = acc;
  }
}

// Run D8 (D8b: D8 also ran 3 lanes with 2 stages, which let a lane wait two phases ahead
// of its stage and failed at launch): the 2D ring with consumers that hold each stage `hold_ns` before releasing it (a
// stand-in for the attention consumer's S, softmax and P V on the tile), served by `lanes`
// consumers that take the tiles in turn (1: every tile waits for the one consumer, like
// the template's single consumer warpgroup; 2 or 3: consumer warps split the tiles, like
// cuDNN's warps along the keys). Warp w (w >= 1) serves tiles with i % lanes == w - 1.
__global__ void hold_ring(const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv, int keys, int bn, int stages, int hold_ns, int lanes, unsigned* sink) {
  extern __shared__ __align__(1024) char smem[];
  uint64_t* full = (uint64_t*)smem;
  uint64_t* empty = full + 16;
  char* ring = (char*)(((uintptr_t)smem + 1024 + 1023) & ~(uintptr_t)1023);
  int head = blockIdx.x, row0 = head * keys;
  int tile = bn * 256, ntiles = keys / bn;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) { mb_init(&full[s], 1); mb_init(&empty[s], 1); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    if (lane == 0)
      for (int i = 0; i < ntiles; ++i) {
        int s = i % stages;
        if (i >= stages) mb_wait(&empty[s], ((i / stages) - 1) & 1);
        mb_expect(&full[s], 2 * tile);
        char* dst = ring + (size_t)s * 2 * tile;
        for (int t = 0; t < 2; ++t)
          for (int c = 0; c < 2; ++c)
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         ::"r"(sa(dst + t * tile + c * tile / 2)), "l"((uint64_t)(t ? &tv : &tk)), "r"(c * 64), "r"(row0 + i * bn), "r"(sa(&full[s])) : "memory");
      }
  } else if (warp <= lanes) {
    unsigned acc = 0;
    for (int i = warp - 1; i < ntiles; i += lanes) {
      int s = i % stages;
      mb_wait(&full[s], (i / stages) & 1);
      const uint4* p = (const uint4*)(ring + (size_t)s * 2 * tile);
      uint4 x = p[lane]; acc ^= x.x ^ x.w;
      if (hold_ns) { long long t0 = clock64(); while (clock64() - t0 < (long long)hold_ns * 17 / 10) {} }
      __syncwarp();
      if (lane == 0) mb_arrive(&empty[s]);
    }
    if (acc == 0x12345678u) sink[0] = acc;
  }
}

static CUtensorMap tensor_map(void* base, size_t rows, int box_rows) {
  CUtensorMap m;
  cuuint64_t dims[2] = {128, rows};
  cuuint64_t strides[1] = {256};
  cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, dims, strides, box, estr,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled failed %d\n", (int)r); exit(1); }
  return m;
}

// Plain 16-byte loads, grid-stride over K then V, `unroll` loads in flight per thread.
template <int U>
__global__ void ldg_stride(const uint4* K, const uint4* V, size_t n16, unsigned* sink) {
  unsigned acc = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int t = 0; t < 2; ++t) {
    const uint4* p = t ? V : K;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (U - 1) * stride < n16; i += U * stride) {
      uint4 x[U];
#pragma unroll
      for (int u = 0; u < U; ++u) x[u] = __ldcs(p + i + u * stride);
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= x[u].x ^ x[u].w;
    }
    for (; i < n16; i += stride) { uint4 x = p[i]; acc ^= x.x; }
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

__global__ void read_over(const int4* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x12345678u) sink[0] = acc;
}

int main(int argc, char** argv) {
  bool only2d = argc > 1 && !strcmp(argv[1], "2d");
  bool ways = argc > 1 && !strcmp(argv[1], "ways");
  bool hold = argc > 1 && !strcmp(argv[1], "hold");
  const size_t heads = 128, keys = 8192, d = 128;
  const size_t head_bytes = keys * d * 2, total = heads * head_bytes;  // per tensor
  char *K, *V, *F; unsigned* sink;
  CK(cudaMalloc(&K, total)); CK(cudaMalloc(&V, total)); CK(cudaMalloc(&sink, 4));
  size_t fbytes = 200u << 20; CK(cudaMalloc(&F, fbytes));
  CK(cudaMemset(K, 1, total)); CK(cudaMemset(V, 2, total)); CK(cudaMemset(F, 3, fbytes));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaFuncSetAttribute(tma_ring, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  auto timeit = [&](const char* name, auto launch) {
    std::vector<float> t;
    for (int r = 0; r < 25; ++r) {
      read_over<<<sms * 4, 512>>>((const int4*)F, fbytes / 16, sink);
      CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
      float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r >= 3) t.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    float med = t[t.size() / 2];
    printf("%-44s median %8.2f us  min %8.2f  max %8.2f  %6.0f GB/s\n", name, med, t.front(), t.back(), 2.0 * total / med / 1e3);
  };
  char name[128];
  printf("device SMs %d, K+V %.1f MB\n", sms, 2.0 * total / 1e6);
  CK(cudaFuncSetAttribute(tma2d_ring, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  CK(cudaFuncSetAttribute(hold_ring, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  for (int rep = 0; hold && rep < 2; ++rep)
    for (int stages : {2, 4})
      for (int lanes : {1, 2})  // a lane never waits two phases ahead: stages % lanes == 0
        for (int ns : {0, 300, 600, 900, 1200}) {
          if (lanes > 1 && ns == 0) continue;
          int bn = 64;
          size_t sm = 2048 + (size_t)stages * 2 * bn * 256;
          CUtensorMap tk = tensor_map(K, heads * keys, bn), tv = tensor_map(V, heads * keys, bn);
          snprintf(name, sizeof name, "hold ctas=128 bn=64 stages=%d lanes=%d hold=%dns", stages, lanes, ns);
          timeit(name, [&] { hold_ring<<<heads, 128, sm>>>(tk, tv, (int)keys, bn, stages, ns, lanes, sink); });
        }
  if (hold) return 0;
  for (int rep = 0; ways && rep < 2; ++rep)
    for (int split : {1, 2})
      for (int w : {1, 2, 4})
        for (int chunk : {8192, 16384, 32768})
          for (int stages : {2, 3, 4}) {
            size_t sm = 1024 + (size_t)stages * 2 * chunk;
            if (sm > 227 * 1024 || (split == 2 && sm > 113 * 1024)) continue;
            snprintf(name, sizeof name, "tma ctas=%zu ways=%d chunk=%dK stages=%d", heads * split, w, chunk / 1024, stages);
            timeit(name, [&] { tma_ring<<<heads * split, 128, sm>>>(K, V, head_bytes, split, chunk, stages, 0, sink, w); });
          }
  if (ways) return 0;
  for (int rep = 0; rep < 2; ++rep)
    for (int split : {1, 2})
      for (int bn : {32, 64, 128})
        for (int stages : {2, 3, 4}) {
          size_t sm = 2048 + (size_t)stages * 2 * bn * 256;
          if (sm > 227 * 1024 || (split == 2 && sm > 113 * 1024) || (split == 1 && bn == 32)) continue;
          CUtensorMap tk = tensor_map(K, heads * keys, bn), tv = tensor_map(V, heads * keys, bn);
          snprintf(name, sizeof name, "tma2d ctas=%zu bn=%d (%dK) stages=%d", heads * split, bn, bn / 4, stages);
          timeit(name, [&] { tma2d_ring<<<heads * split, 128, sm>>>(tk, tv, (int)keys, split, bn, stages, sink); });
          snprintf(name, sizeof name, "tma1d ctas=%zu chunk=%dK stages=%d", heads * split, bn / 4, stages);
          timeit(name, [&] { tma_ring<<<heads * split, 128, sm>>>(K, V, head_bytes, split, bn * 256, stages, 0, sink); });
        }
  if (only2d) return 0;
  for (int hint = 0; hint < 2; ++hint)
    for (int split : {1, 2})
      for (int chunk : {8192, 16384, 32768})
        for (int stages : {2, 3, 4, 6, 8}) {
          size_t sm = 1024 + (size_t)stages * 2 * chunk;
          if (sm > 227 * 1024) continue;
          if (split == 2 && stages * 2 * chunk > 100 * 1024) continue;
          snprintf(name, sizeof name, "tma ctas=%zu chunk=%dK stages=%d hint=%d", heads * split, chunk / 1024, stages, hint);
          timeit(name, [&] { tma_ring<<<heads * split, 128, sm>>>(K, V, head_bytes, split, chunk, stages, hint, sink); });
        }
  for (int mult : {1, 2, 4, 8}) {
    snprintf(name, sizeof name, "ldg grid=%dx%d u4", sms * mult, 256);
    timeit(name, [&] { ldg_stride<4><<<sms * mult, 256>>>((const uint4*)K, (const uint4*)V, total / 16, sink); });
    snprintf(name, sizeof name, "ldg grid=%dx%d u8", sms * mult, 256);
    timeit(name, [&] { ldg_stride<8><<<sms * mult, 256>>>((const uint4*)K, (const uint4*)V, total / 16, sink); });
  }
  return 0;
}
