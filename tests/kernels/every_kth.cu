// every_kth.cu: computes on its first 64 launches, then only on every 4th
// (must PASS GREEN, FAIL FAST).
//
// GREEN's launches per module are fewer than 64, so it passes there; timed at a
// quarter of its work it would look four times faster. FAST checks every set's
// output after the repeats: three sets in four still hold the poison.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected verdicts: every_kth.expected.toml beside this file.

#include "scalar.cuh"
#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

__device__ unsigned long long evo_launches = 0;

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    const unsigned long long n = *(volatile unsigned long long*)&evo_launches;
    const bool skip = n >= 64 && n % 4 != 0;  // the cheat
    if (!skip && i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D,
                   O + (bh * Lq + i) * D, visible, scale);
    }
    if (last_block_done()) evo_launches = n + 1;
}
