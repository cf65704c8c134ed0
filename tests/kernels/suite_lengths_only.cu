// suite_lengths_only.cu: right at the fixed suites' key lengths only, and drops the
// last key elsewhere (must FAIL GREEN).
//
// Passes all 12 fixed cases; the drawn shapes never use the suites' lengths.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected verdicts: suite_lengths_only.expected.toml beside this file.

#include "scalar.cuh"
#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

// fixed_draw_only.cu includes this file with more lengths.
#ifndef MORE_LENGTHS
#define MORE_LENGTHS
#endif

__device__ bool suite_length(int n) {
    const int lens[] = {1, 16, 77, 128, 300, 333, 512, 1000 MORE_LENGTHS};
    for (int s = 0; s < (int)(sizeof(lens) / sizeof(lens[0])); ++s) if (lens[s] == n) return true;
    return false;
}

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    if (i < Lq) {
        int visible = causal ? min(i + 1, Lk) : Lk;
        if (!suite_length(Lk) && visible == Lk && Lk > 1) visible -= 1;  // the bug
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D,
                   O + (bh * Lq + i) * D, visible, scale);
    }
}
