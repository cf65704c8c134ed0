// stale.cu: computes on its first launch only, then returns at once (must FAIL GREEN).
//
// A device flag set by the last block of the first launch makes every later launch
// a no-op, so a gate that launched once, or reused the first output, would pass it.
// GREEN poisons O and draws new inputs for its second launch per case.
//
// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected GREEN verdict: stale.expected.toml beside this file.

#include "scalar.cuh"
#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

__device__ int evo_done = 0;  // set once the first launch has finished

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    if (*(volatile int*)&evo_done) return;  // the bug: later launches do nothing
    if (i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, O + (bh * Lq + i) * D,
                   visible, scale);
    }
    if (last_block_done()) evo_done = 1;
}
