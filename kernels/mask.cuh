// The problem a kernel of the second ABI is told about beyond its sizes
// (kernels/ABI.md): which keys each query row sees, and which K/V head a query head
// reads. Both templates start with this file (the host prepends it; crates/codegen).
//
// Row i's diagonal is key i + diag (diag = 0: top-left, PyTorch's is_causal;
// diag = Lk - Lq: bottom-right, the KV-cache convention). Row i sees keys j with
//   lo(i) <= j < hi(i),  lo(i) = max(0, i + diag - wl)         (wl >= 0, else 0)
//                        hi(i) = min(Lk, i + diag + 1          (causal)
//                                    , i + diag + wr + 1)      (wr >= 0)
// and none when hi(i) <= lo(i): that row's output is zeros and its lse -inf.
// With EVO_PACK_GQA a CTA's rows are the G = H / Hkv query heads of one K/V head, one
// after another (the memory order of [B, H, Lq, D]): row r is query r % Lq.
// The host keeps |diag| and the windows within Lq + Lk (a wider window is none), so
// no bound overflows an int.
struct Mask {
  int Lk, causal, diag, wl, wr;
  // Packed grouped-query heads (EVO_PACK_GQA): CTA row r is query r % period of the
  // group's head r / period; 0 when rows are queries.
  int period;

  // The query of row r.
  __device__ __forceinline__ int query(int r) const { return period ? r % period : r; }
  __device__ __forceinline__ int lo(int i) const { return wl >= 0 ? max(0, i + diag - wl) : 0; }
  __device__ __forceinline__ int hi(int i) const {
    int h = Lk;
    if (causal) h = min(h, i + diag + 1);
    if (wr >= 0) h = min(h, i + diag + wr + 1);
    return h;
  }
  __device__ __forceinline__ bool masked(int r, int j) const {
    const int i = query(r);
    return j < lo(i) || j >= hi(i);
  }
  // The queries of rows r0..r1: [first, last] (all of them when packed rows wrap).
  __device__ __forceinline__ int2 queries(int r0, int r1) const {
    if (!period) return make_int2(r0, r1);
    const int a = r0 % period, b = r1 % period;
    if (r1 - r0 + 1 >= period || a > b) return make_int2(0, period - 1);
    return make_int2(a, b);
  }
  // No key of [n0, n0 + n) is masked for any of the rows r0..r1 (lo and hi grow with
  // the query, so the first query bounds hi and the last bounds lo).
  __device__ __forceinline__ bool clear(int r0, int r1, int n0, int n) const {
    const int2 q = queries(r0, r1);
    return n0 + n <= hi(q.x) && n0 >= lo(q.y);
  }
  // The tiles of n keys that rows r0..r1 see at least one key of: [first, end),
  // empty (first == end) when none of those rows sees a key.
  __device__ __forceinline__ int2 tiles(int r0, int r1, int n) const {
    const int2 q = queries(r0, r1);
    const int from = lo(q.x), to = hi(q.y);
    if (to <= from) return make_int2(0, 0);
    return make_int2(from / n, (to + n - 1) / n);
  }
};

// The K/V head that flattened query head bh = b * H + h reads: h / (H / Hkv) of batch b.
__device__ __forceinline__ int kv_head_of(int bh, int H, int Hkv) {
  return (bh / H) * Hkv + (bh % H) / (H / Hkv);
}
