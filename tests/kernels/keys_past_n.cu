// keys_past_n.cu: ignores every key past the 1024th (must FAIL GREEN).
//
// The fixed suites' longest key sequence is 1000, so every fixed case passes; the
// shapes GREEN draws per run include one with Lk >= 8192.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected verdicts: keys_past_n.expected.toml beside this file.

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
        const int visible = min(causal ? min(i + 1, Lk) : Lk, 1024);  // the bug
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D,
                   O + (bh * Lq + i) * D, visible, scale);
    }
}
