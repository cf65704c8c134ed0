// no_causal.cu: ignores the causal mask (must FAIL GREEN).
//
// Right on every non-causal case; on causal ones each row sees future keys.
//
// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected GREEN verdict: no_causal.expected.toml beside this file.

#include "scalar.cuh"
#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    if (i < Lq) {
        const elem_t* q = Q + (bh * Lq + i) * D;
        const elem_t* k = K + bh * Lk * D;
        const elem_t* v = V + bh * Lk * D;
        elem_t* o = O + (bh * Lq + i) * D;
        float qf[D], acc[D];
        for (int c = 0; c < D; ++c) { qf[c] = to_float(q[c]); acc[c] = 0.0f; }
        const int visible = Lk;
        float m = -__int_as_float(0x7f800000), l = 0.0f;
        for (int j = 0; j < visible; ++j) {
            float s = 0.0f;
            for (int c = 0; c < D; ++c) s += qf[c] * to_float(k[j * D + c]);
            s *= scale;
            const float m_new = fmaxf(m, s);
            const float corr = expf(m - m_new);  // m = -inf on the first key: exp(-inf) = 0
            const float p = expf(s - m_new);
            l = l * corr + p;
            m = m_new;
            for (int c = 0; c < D; ++c) acc[c] = acc[c] * corr + p * to_float(v[j * D + c]);
        }
        for (int c = 0; c < D; ++c) o[c] = from_float(acc[c] / l);
    }
}
