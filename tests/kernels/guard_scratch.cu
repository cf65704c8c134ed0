// guard_scratch.cu: right, but inside every other burst of back-to-back launches
// (after its second) it keeps scratch in the 32 elements past the end of O (must PASS
// GREEN, FAIL FAST).
//
// Writing past O is caught by the guard region after it; against a FAST that restored
// the guards before every repeat and read them only after the last one, a kernel that
// wrote past the end in other repeats was never seen. FAST now counts changed guard
// words after every repeat. Bursts as scalar.cuh tells them.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see. Expected verdicts: guard_scratch.expected.toml beside this file.

#include "scalar.cuh"

#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    const Burst burst = burst_at_start();
    if (i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, O + (bh * Lq + i) * D,
                   visible, scale);
    }
    if (burst.follows && burst.number >= 2 && burst.number % 2 == 1 && blockIdx.x == 0 &&
        blockIdx.y == 0 && threadIdx.x < 32) {
        // The cheat: scratch past the end of O.
        const size_t end = (size_t)B * H * Lq * D;
        O[end + threadIdx.x] = from_float((float)threadIdx.x);
    }
    if (last_block_done()) burst_at_end(burst);
}
