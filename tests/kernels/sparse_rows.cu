// sparse_rows.cu: right everywhere but on one query row in 8192 of a large problem
// (b·H·Lq + row ≡ 8191 mod 8192 when B·H·Lq·Lk·D > 2^27), where every output is off by
// one (must FAIL GREEN: the default suite's B3 H5 L1000 D128 case has such a row).
//
// Against a GREEN that checked 48 sampled rows per (b, h) of large problems, it passed
// whenever the samples missed those rows — almost always. GREEN now checks every row
// of a large case against the device's reference.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see. Expected verdicts: sparse_rows.expected.toml beside this file.

#include "scalar.cuh"

#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    if (i >= Lq) return;
    const bool large = (unsigned long long)B * H * Lq * Lk * D > (1ull << 27);
    const bool defect = large && (bh * Lq + i) % 8192 == 8191;  // the bug
    const int visible = causal ? min(i + 1, Lk) : Lk;
    attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, O + (bh * Lq + i) * D,
               visible, scale, defect ? 1.0f : 0.0f);
}
