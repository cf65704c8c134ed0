// skip_repeats.cu: computes every launch except those inside every other burst of
// back-to-back launches (after its second burst), where it returns at once (must PASS
// GREEN, FAIL FAST).
//
// A burst is told by the device clock (scalar.cuh): FAST's repeats are bursts, GREEN's
// launches never are. Against a FAST that checked only the last repeat's outputs, half its
// repeats cost nothing, the median halved, and it passed whenever the last repeat was
// an even one. FAST now checks a launch of every repeat, chosen after the repeat.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see. Expected verdicts: skip_repeats.expected.toml beside this file.

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
    const bool skip = burst.follows && burst.number >= 2 && burst.number % 2 == 1;  // the cheat
    if (!skip && i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, O + (bh * Lq + i) * D,
                   visible, scale);
    }
    if (last_block_done()) burst_at_end(burst);
}
