// store_past_end.cu: right, but the last row also stores one row past the end of O
// (must FAIL GREEN).
//
// Every element of O is right; the extra row lands in the guard region GREEN places
// after O, which must still hold its pattern after the launch.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected verdicts: store_past_end.expected.toml beside this file.

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
        const int visible = causal ? min(i + 1, Lk) : Lk;
        elem_t* o = O + (bh * Lq + i) * D;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, o, visible, scale);
        if (bh == (size_t)B * H - 1 && i == Lq - 1)
            for (int c = 0; c < D; ++c) o[D + c] = o[c];  // the bug: one row too many
    }
}
