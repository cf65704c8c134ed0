// evo: splits of the keys merged inside a thread block cluster (the Hopper template's
// `cluster_combine` gene, EVO_CLUSTER_COMBINE; kernels/ABI.md, "Splits merged in a
// cluster"). Prepended to kernels/attention_sm90.cu by the host; NVRTC only.
//
// With split-KV each of S CTAs computes one query block over 1/S of its keys and ends
// with an unnormalised O, a row maximum m and a row sum l. The combine kernel
// (kernels/combine.cuh) merges them from a global workspace in a second launch. Here
// the S CTAs of a query block are one cluster (`__cluster_dims__(1, 1, S)` over the
// grid's split axis, so a CTA's cluster rank is its split; a persistent grid is
// `(S, 1, 1)` clusters whose CTAs take the same query blocks, rank = split) and merge in
// distributed shared memory after each tile:
//
//   * wgmma's accumulator layout is the same in every CTA, so consumer thread t of
//     warpgroup c holds the same rows and columns of O in each: the merge needs no
//     change of layout, only the same thread's values from the other CTAs;
//   * CTA r finalises the 8-column groups [r J, (r + 1) J) of O, J = ceil(D/8 / S).
//     Every other CTA sends it, thread by thread, those groups (one float4 each) and
//     its (m0, m1, l0, l1) into a slot of its own, by st.async: each store completes
//     its bytes on CTA r's mbarrier for warpgroup c, which one of r's threads armed
//     with the bytes it expects (no fence and no arrival per sender; a first version
//     with st.shared::cluster and an arrive.release per destination paid a fence per
//     destination: +1.4, +7.7 and +20 µs at 2, 4 and 8 splits, run C1);
//   * CTA r waits on that mbarrier (acquire, cluster scope), rescales every source by
//     exp(m_src - m_max) (zero for a source that saw no key), sums, and stores its
//     columns of O.
//
// A CTA may arrive on another's mbarrier only once that one has initialised it: every
// thread arrives on the cluster barrier after its CTA's barriers are initialised, and
// waits on it before its first remote access. Every thread ends on a second phase of the
// same barrier (`leave`), so no CTA exits before its whole cluster is done.

namespace evo_cluster {

__device__ __forceinline__ unsigned rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// The cluster barrier, split: arrive once the CTA's mbarriers are initialised, wait
// before touching another CTA's shared memory.
__device__ __forceinline__ void arrive_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void wait_all() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Every thread of the kernel calls this once, last: it waits for the barrier's first
// phase if it has not (`waited`: the producer and, when the warpgroups split the keys,
// those that never merge), then arrives on a second phase and waits for it. No CTA of a
// cluster leaves before every thread of every CTA of the cluster is done with the others'
// shared memory: a CTA whose merge has finished cannot exit while the cluster's last
// asynchronous stores into or out of it may be in flight (the CUDA programming guide's
// rule for distributed shared memory). Warpgroups that arrived on the first phase and
// left without waiting on it were the hazard this closes.
//
// The second arrival is relaxed: it orders no memory, since what the others wrote into this
// CTA has landed (the merge waited on its bytes) and nothing is read across the cluster
// after it. A release there would hold every thread until its own stores of O reached
// global memory: 0.7 µs (10%) on the seed rows' 6.5 µs champions (run E1).
__device__ __forceinline__ void leave(bool waited) {
  if (!waited) wait_all();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  wait_all();
}

// The address in CTA `cta`'s shared memory of this CTA's shared address `addr`.
__device__ __forceinline__ unsigned remote(unsigned addr, unsigned cta) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(cta));
  return r;
}

// An asynchronous store of 16 bytes into another CTA's shared memory that completes
// 16 transaction bytes on that CTA's mbarrier `bar` (no fence, no arrival).
__device__ __forceinline__ void store4(unsigned addr, float a, float b, float c, float d,
                                       unsigned bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(addr),
      "f"(a), "f"(b), "f"(c), "f"(d), "r"(bar)
      : "memory");
}

// This CTA's thread announces the transaction bytes its mbarrier will receive.
__device__ __forceinline__ void expect_bytes(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ float4 load4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Waits for phase `parity` of a local mbarrier that other CTAs arrive on.
__device__ __forceinline__ void wait_local(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_CLUSTER:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_CLUSTER;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// The exchange's shape for head dim kD over kS splits, per consumer warpgroup: kS - 1
// slots (one per other CTA), each kJ float4 of O and one of statistics per thread.
template <int kD, int kS>
struct Exchange {
  static constexpr int kGroups = kD / 8;  // 8-column groups of O (the real D)
  static constexpr int kJ = (kGroups + kS - 1) / kS;
  static constexpr int kSlotBytes = (kJ + 1) * 16 * 128;
  static constexpr int kBytes = (kS - 1) * kSlotBytes;
  // Where CTA `from`'s values land in CTA `to`'s exchange.
  __device__ static unsigned slot(unsigned region, int from, int to) {
    return region + (from < to ? from : from - 1) * kSlotBytes;
  }
  // The bytes CTA `to` receives per warpgroup: from each other CTA, its column groups
  // (fewer for the last ranks when kS does not divide kGroups) and the statistics.
  __device__ static unsigned bytes_to(int to) {
    const int end = (to + 1) * kJ < kGroups ? (to + 1) * kJ : kGroups;
    const int groups = end > to * kJ ? end - to * kJ : 0;
    return (kS - 1) * (groups + 1) * 16 * 128;
  }
};

__device__ __forceinline__ float weight(float m, float m_max, bool exp2) {
  if (m == -__int_as_float(0x7f800000)) return 0.0f;  // this source saw no key
  return exp2 ? exp2f(m - m_max) : __expf(m - m_max);
}

// Merges one consumer thread's partial O (value 4j + 2i + e: row i, column 8j + 2 quad
// + e, unnormalised), m and l (this thread's columns' share) with the other CTAs' and
// calls store(j, i, v0, v1) for the normalised values of its CTA's column groups; the CTA
// of rank 0 also calls lse(m, l) with its rows' merged maxima and sums (l summed over
// the quad), for the forward's log-sum-exp (evo_lse).
// `region` and `bar` are this warpgroup's exchange and mbarrier (this CTA's addresses),
// `parity` the mbarrier's phase. The caller has waited on the cluster barrier once.
//
// A persistent CTA merges once per tile and alternates two exchanges: the other CTAs
// send merge j + 2 into the exchange of merge j only after their own merge j + 1, which
// needed this CTA's values of j + 1, which it sends after it has read those of j.
template <int kD, int kS, bool kExp2, int kN, class Store, class Lse>
__device__ __forceinline__ void merge(const float (&o)[kN], const float (&m)[2], const float (&l)[2],
                                      unsigned region, unsigned bar, unsigned parity, int tid,
                                      Store store, Lse lse) {
  using X = Exchange<kD, kS>;
  static_assert(kN * 2 >= kD, "O has fewer columns than the head dim");
  const int r = (int)rank();
  if (tid == 0) expect_bytes(bar, X::bytes_to(r));
#pragma unroll
  for (int d = 0; d < kS; ++d) {
    if (d == r) continue;
    const unsigned to = remote(X::slot(region, r, d), (unsigned)d);
    const unsigned to_bar = remote(bar, (unsigned)d);
#pragma unroll
    for (int jl = 0; jl < X::kJ; ++jl) {
      const int j = d * X::kJ + jl;
      if (j < X::kGroups)
        store4(to + (jl * 128 + tid) * 16, o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3],
               to_bar);
    }
    store4(to + (X::kJ * 128 + tid) * 16, m[0], m[1], l[0], l[1], to_bar);
  }
  wait_local(bar, parity);
  // Two passes over the sources' statistics (shared-memory reads are cheap; holding
  // S - 1 float4 in registers is not): the row maxima, then the weights and sums.
  float mx[2] = {m[0], m[1]};
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) {
    const float4 st = load4(region + s * X::kSlotBytes + (X::kJ * 128 + tid) * 16);
    mx[0] = fmaxf(mx[0], st.x);
    mx[1] = fmaxf(mx[1], st.y);
  }
  float w[kS][2];  // source weights: this CTA's first, then the slots'
  float sum[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    w[0][i] = weight(m[i], mx[i], kExp2);
    sum[i] = l[i] * w[0][i];
  }
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) {
    const float4 st = load4(region + s * X::kSlotBytes + (X::kJ * 128 + tid) * 16);
    w[s + 1][0] = weight(st.x, mx[0], kExp2);
    w[s + 1][1] = weight(st.y, mx[1], kExp2);
    sum[0] += st.z * w[s + 1][0];
    sum[1] += st.w * w[s + 1][1];
  }
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sum[i] += __shfl_xor_sync(0xffffffff, sum[i], 1);
    sum[i] += __shfl_xor_sync(0xffffffff, sum[i], 2);
    inv[i] = sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f;
  }
  if (r == 0) lse(mx, sum);
#pragma unroll
  for (int j = 0; j < X::kGroups; ++j) {
    if (j / X::kJ != r) continue;
    const int jl = j - r * X::kJ;
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = o[4 * j + e] * w[0][e / 2];
#pragma unroll
    for (int s = 0; s < kS - 1; ++s) {
      const float4 q = load4(region + s * X::kSlotBytes + (jl * 128 + tid) * 16);
      v[0] += q.x * w[s + 1][0];
      v[1] += q.y * w[s + 1][0];
      v[2] += q.z * w[s + 1][1];
      v[3] += q.w * w[s + 1][1];
    }
    store(j, 0, v[0] * inv[0], v[1] * inv[0]);
    store(j, 1, v[2] * inv[1], v[3] * inv[1]);
  }
}

}  // namespace evo_cluster
