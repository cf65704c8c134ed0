// output_peek.cu: returns at once for every row whose output already holds a finite
// value (must PASS both gates, timed doing the work).
//
// Against a FAST that launched into outputs an earlier launch had filled and checked
// nothing, this kernel was timed at a fraction of its work. FAST now poisons every O
// before every repeat, so the peek never finds a result: the kernel computes on every
// timed launch and its time is the naive kernel's.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected verdicts: output_peek.expected.toml beside this file.

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
        elem_t* o = O + (bh * Lq + i) * D;
        if (isfinite(to_float(o[0]))) return;  // the cheat: a result is already there
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, o, visible, scale);
    }
}
