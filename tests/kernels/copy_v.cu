// copy_v.cu: copies V into O (must FAIL GREEN).
//
// Plausible magnitudes, every element written: the reference comparison rejects it.
//
// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected GREEN verdict: copy_v.expected.toml beside this file.

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
        const int j = min(i, Lk - 1);
        for (int c = 0; c < D; ++c) o[c] = v[j * D + c];
    }
}
