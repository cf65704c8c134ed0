// What the two backward templates share, written once: the launch geometry's shape and
// the ABI constants, the workspace's layout, which query rows see a block of keys, and the
// pre and post kernels. The host appends this file to each backward template after its
// configuration and staging (kernels/attention_bwd.cu, kernels/attention_bwd_sm90.cu) and
// before its main and dq kernels. It reads the template's kD, kThreads, kDqSeparate,
// dq_rows() and the pre / post kernels' kRowsPerBlock and kRowThreads (declared in each
// template's configuration: NVRTC emits every namespace-scope constant into the CUBIN in
// declaration order, so moving them here would change the compiled kernels), and the
// element conversions of kernels/mma.cuh. NVRTC only.

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {EVO_DQ_SEPARATE ? 1 : 0};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}; block_m is the dq kernel's rows
// per CTA when there is one.
extern "C" __constant__ int evo_bwd_geometry[10] = {
    EVO_BLOCK_N,
    evo::kThreads,
    EVO_SMEM_BYTES,
    EVO_DQ_SEPARATE ? evo::dq_rows() : EVO_BLOCK_M,
    EVO_DQ_SEPARATE ? evo::kThreads : 0,
    EVO_DQ_SMEM_BYTES,
    evo::kRowsPerBlock,
    evo::kRowThreads,
    EVO_DQ_SEPARATE ? 0 : evo::kRowsPerBlock,
    EVO_DQ_SEPARATE ? 0 : evo::kRowThreads};

namespace evo {

// Workspace (B*H*Lq*(D+1) floats, kernels/ABI.md): the fp32 dQ accumulator
// [B*H*Lq][D] first, so that it starts on the allocation's alignment and its rows take
// 8- and 16-byte accesses (vector atomics, the Hopper template's bulk reduce), then dpsum
// [B*H*Lq].
__device__ __forceinline__ float* dq_accumulator(float* ws) { return ws; }
__device__ __forceinline__ float* dpsum_of(float* ws, int B, int H, int Lq) {
  return ws + (size_t)B * H * Lq * kD;
}

// Where element (row, col) of a head's dQ accumulator is, from the head's start (the head
// holds Lq * D floats). Row-major [Lq][D] for adds from the registers. With the Hopper
// template's bulk adds (EVO_DQ_BULK) the head is cut into blocks of 64 rows (the last
// one's rows_in = the rest) and each block into units of 64 columns (D96's last, 32),
// each unit contiguous: rows_in rows of its width, the 8-float chunks of row r XOR-ed
// with r (mod the unit's chunks), the layout a warpgroup stages and adds whole.
//
// Within a unit of width w (64 or 32): row rr, 8-float chunk `chunk`, element e of the
// chunk. The Hopper template's staging writes its units with this, and dq_acc_at reads.
__device__ __forceinline__ size_t dq_unit_at(int rr, int chunk, int e, int w) {
  return (size_t)(rr * w) + ((chunk ^ (rr & (w / 8 - 1))) * 8) + e;
}
#if defined(EVO_DQ_BULK) && EVO_DQ_BULK && !EVO_DQ_SEPARATE
__device__ __forceinline__ size_t dq_acc_at(int Lq, int row, int col) {
  const int rows_in = min(64, Lq - row / 64 * 64), cb = col / 64, w = min(64, kD - cb * 64);
  return (size_t)(row / 64) * 64 * kD + cb * 64 * rows_in +
         dq_unit_at(row % 64, (col % 64) / 8, col % 8, w);
}
#else
__device__ __forceinline__ size_t dq_acc_at(int Lq, int row, int col) {
  return (size_t)row * kD + col;
}
#endif

// The query rows that see at least one of the keys [n0, n1) (n0 < n1 <= Lk):
// [x, y], empty when x > y. lo(i) and hi(i) (kernels/mask.cuh) grow with i, and row i
// sees one of them iff hi(i) > n0 and lo(i) < n1, so the rows are one interval.
__device__ __forceinline__ int2 queries_of_keys(const Mask& mk, int Lq, int n0, int n1) {
  int first = 0, last = Lq - 1;
  if (mk.causal) first = max(first, n0 - mk.diag);
  if (mk.wr >= 0) first = max(first, n0 - mk.diag - mk.wr);
  if (mk.wl >= 0) last = min(last, n1 - 1 - mk.diag + mk.wl);
  return make_int2(first, last);
}

}  // namespace evo

// dpsum[row] = sum_d dO[row][d] * O[row][d] (fp32), and with the atomic dQ the row's
// accumulator zeroed (the host never clears the workspace). One warp per row.
// grid (ceil(Lq / 4), B*H), block 128.
extern "C" __global__ void __launch_bounds__(evo::kRowThreads)
    evo_attention_bwd_pre(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                          const elem_t* __restrict__ V, const elem_t* __restrict__ O,
                          const elem_t* __restrict__ dO, const float* __restrict__ lse,
                          elem_t* __restrict__ dQ, elem_t* __restrict__ dK,
                          elem_t* __restrict__ dV, float* __restrict__ ws, int B, int H, int Lq,
                          int Lk, int causal, float scale, int Hkv, int diag, int window_left,
                          int window_right) {
  using namespace evo;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRowsPerBlock + warp;
  if (row >= Lq) return;
  const size_t r = (size_t)blockIdx.y * Lq + row;
  const elem2_t* o2 = reinterpret_cast<const elem2_t*>(O + r * kD);
  const elem2_t* do2 = reinterpret_cast<const elem2_t*>(dO + r * kD);
  float acc = 0.0f;
#pragma unroll
  for (int p = lane; p < kD / 2; p += 32) {
    const float2 a = to_float2(o2[p]), b = to_float2(do2[p]);
    acc = fmaf(a.x, b.x, fmaf(a.y, b.y, acc));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) dpsum_of(ws, B, H, Lq)[r] = acc;
  if constexpr (!kDqSeparate) {
    float* acc_row = dq_accumulator(ws) + r * kD;
#pragma unroll
    for (int p = lane; p < kD / 4; p += 32)
      reinterpret_cast<float4*>(acc_row)[p] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// dQ = scale * accumulator, as T (atomic dQ only; an empty kernel otherwise).
// grid (ceil(Lq / 4), B*H), block 128.
extern "C" __global__ void __launch_bounds__(evo::kRowThreads)
    evo_attention_bwd_post(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                           const elem_t* __restrict__ V, const elem_t* __restrict__ O,
                           const elem_t* __restrict__ dO, const float* __restrict__ lse,
                           elem_t* __restrict__ dQ, elem_t* __restrict__ dK,
                           elem_t* __restrict__ dV, float* __restrict__ ws, int B, int H, int Lq,
                           int Lk, int causal, float scale, int Hkv, int diag, int window_left,
                           int window_right) {
  using namespace evo;
  if constexpr (!kDqSeparate) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * kRowsPerBlock + warp;
    if (row >= Lq) return;
    const size_t r = (size_t)blockIdx.y * Lq + row;
    const float* acc_head = dq_accumulator(ws) + (size_t)blockIdx.y * Lq * kD;
    elem2_t* dq2 = reinterpret_cast<elem2_t*>(dQ + r * kD);
#pragma unroll
    for (int p = lane; p < kD / 4; p += 32) {
      const float4 a = *reinterpret_cast<const float4*>(acc_head + dq_acc_at(Lq, row, 4 * p));
      dq2[2 * p] = from_float2(a.x * scale, a.y * scale);
      dq2[2 * p + 1] = from_float2(a.z * scale, a.w * scale);
    }
  }
}
