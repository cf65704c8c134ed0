// scribble_inputs.cu: right, but once a launch is done it keeps a counter in the first
// element of its own K (must FAIL GREEN).
//
// Q, K and V are the caller's: a kernel that writes into them (as scratch, or to leave
// itself a note for the next launch) corrupts the caller's data. The device check of
// GREEN's large cases and of FAST's live launches draws the inputs again and compares
// them with what the kernel left.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see. Expected verdicts: scribble_inputs.expected.toml beside this file.

#include "scalar.cuh"

#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

__device__ unsigned int evo_launches = 0;

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    if (i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, O + (bh * Lq + i) * D,
                   visible, scale);
    }
    if (last_block_done()) {
        ++evo_launches;
        ((elem_t*)K)[0] = from_float((float)(evo_launches % 64));  // the cheat
    }
}
