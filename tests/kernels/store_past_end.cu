// store_past_end.cu: right, but the last row also stores one row past the end of O
// (must FAIL GREEN).
//
// Every element of O is right; the extra row lands in the guard region GREEN places
// after O, which must still hold its pattern after the launch.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax; compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: store_past_end.expected.toml beside this file.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if EVO_BF16
typedef __nv_bfloat16 elem_t;
__device__ __forceinline__ float to_float(elem_t x) { return __bfloat162float(x); }
__device__ __forceinline__ elem_t from_float(float x) { return __float2bfloat16(x); }
#else
typedef __half elem_t;
__device__ __forceinline__ float to_float(elem_t x) { return __half2float(x); }
__device__ __forceinline__ elem_t from_float(float x) { return __float2half(x); }
#endif

#define D EVO_HEAD_DIM
#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

// One query row, keys [0, visible), into o[0, D).
__device__ void attend_row(const elem_t* q, const elem_t* k, const elem_t* v, elem_t* o,
                           int visible, float scale) {
    float qf[D], acc[D];
    for (int c = 0; c < D; ++c) { qf[c] = to_float(q[c]); acc[c] = 0.0f; }
    float m = -__int_as_float(0x7f800000), l = 0.0f;
    for (int j = 0; j < visible; ++j) {
        float s = 0.0f;
        for (int c = 0; c < D; ++c) s += qf[c] * to_float(k[j * D + c]);
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * corr + p;
        m = m_new;
        for (int c = 0; c < D; ++c) acc[c] = acc[c] * corr + p * to_float(v[j * D + c]);
    }
    for (int c = 0; c < D; ++c) o[c] = from_float(acc[c] / l);
}

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    if (i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        elem_t* o = O + (bh * Lq + i) * D;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, o, visible, scale);
        if (bh == (size_t)B * H - 1 && i == Lq - 1)
            for (int c = 0; c < D; ++c) o[D + c] = o[c];  // the bug: one row too many
    }
}
