// The split-KV combine both templates share (kernels/ABI.md, "Split-KV"); the host
// appends this file to each template (crates/codegen), after its configuration.
//
//   lse = log(sum_s exp(lse_s)),  O = sum_s exp(lse_s - lse) * o_s   (written as elem_t)
//
// In the lse twin (EVO_LSE = 1) with `lse` not null (evo_lse, kernels/ABI.md) the row's
// lse is written there too, +inf for a row no split saw: the forward's log-sum-exp of a
// split kernel comes from here.
//
// One warp per row, EVO_COMBINE_ROWS rows per block, grid (ceil(Lq / rows), B*H).
// Lane s reads split s's lse (EVO_SPLIT_KV <= 32), so the weights take one load per
// lane and two warp reductions; the splits' o rows are then read by a fully unrolled
// loop whose loads depend on nothing but the address, so all of them are in flight
// together (a loop that reads a split's lse and then its o, split after split, pays
// two dependent memory latencies per split).
static_assert(EVO_SPLIT_KV >= 1 && EVO_SPLIT_KV <= 32,
              "the combine gives each split one lane: EVO_SPLIT_KV must be 1..32");

extern "C" __global__ void __launch_bounds__(EVO_COMBINE_THREADS)
    evo_attention_combine(const float* __restrict__ ws_o, const float* __restrict__ ws_lse,
                          elem_t* __restrict__ O, int B, int H, int Lq, int splits
#if EVO_LSE
                          , float* __restrict__ lse
#endif
                          ) {
  using namespace evo;
  constexpr int kSplits = EVO_SPLIT_KV;
  constexpr int kPairs = (kD + 63) / 64;  // float2 columns per lane: 2 lane + 64 k
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * EVO_COMBINE_ROWS + warp;
  const int bh = blockIdx.y;
  if (row >= Lq) return;
  const size_t split_rows = (size_t)B * H * Lq;  // one split's rows of the workspace
  const size_t r0 = (size_t)bh * Lq + row;
  const int n = min(splits, kSplits);

  const float lse_s = lane < n ? ws_lse[lane * split_rows + r0] : neg_inf();
  float mx = lse_s;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
  // A row no split saw stays finite (weights 0, O 0), as a row with no key must.
  const float m_use = mx == neg_inf() ? 0.0f : mx;
  float w = __expf(lse_s - m_use);  // 0 for -inf and for the lanes past the splits
  float wsum = w;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) wsum += __shfl_xor_sync(0xffffffff, wsum, o);
  w *= wsum > 0.0f ? 1.0f / wsum : 0.0f;
#if EVO_LSE
  if (lse != nullptr && lane == 0)
    lse[r0] = wsum > 0.0f ? m_use + logf(wsum) : __int_as_float(0x7f800000);
#endif

  float2 acc[kPairs];
#pragma unroll
  for (int k = 0; k < kPairs; ++k) acc[k] = make_float2(0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    const float ws = __shfl_sync(0xffffffff, w, s);
    // An empty split's o is 0 anyway (kernels/ABI.md): skip its loads. `ws` is the
    // warp's one value, so the branch never diverges.
    if (s >= n || ws == 0.0f) continue;
    const float* src = ws_o + (s * split_rows + r0) * kD;
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const int c = 2 * lane + 64 * k;
      if (c >= kD) continue;
      const float2 v = *reinterpret_cast<const float2*>(src + c);
      acc[k].x = fmaf(ws, v.x, acc[k].x);
      acc[k].y = fmaf(ws, v.y, acc[k].y);
    }
  }
  elem_t* dst = O + r0 * kD;
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    const int c = 2 * lane + 64 * k;
    if (c >= kD) continue;
#if EVO_BF16
    *reinterpret_cast<__nv_bfloat162*>(dst + c) = __floats2bfloat162_rn(acc[k].x, acc[k].y);
#else
    *reinterpret_cast<__half2*>(dst + c) = __floats2half2_rn(acc[k].x, acc[k].y);
#endif
  }
}
