// batch_sets.cu: computes, in one launch, its own output and the output of the launch
// it expects next (the input and output slots one further on), and returns at once when
// it finds its own output already there (must PASS GREEN; FAST must fail it or time it
// within noise of naive.cu).
//
// Against a FAST whose sets held fixed (Q, K, V, O) tuples launched in slot order, half
// its launches did two problems at once (twice the blocks: a better-filled GPU) and the
// other half nothing, with right outputs. FAST now pairs the slots of each tensor anew
// every repeat and launches in a random order: the launch it computes ahead is not the
// one that comes, and the outputs it leaves are wrong.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see. Expected verdicts: batch_sets.expected.toml beside this file.

#include "scalar.cuh"

#define ROWS 32

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
// Threads 0-31 take the block's rows of this launch, 32-63 the same rows of the next.
extern "C" __constant__ int evo_geometry[6] = {ROWS, 2 * ROWS, 0, 1, 0, 0};

// What it has learnt of the slots, written only between launches: the shape they are
// for, and the lowest and highest Q, K, V and O addresses launched on, which lie a
// whole number of slots apart (anything else starts the learning again).
__device__ unsigned long long evo_shape = 0;
__device__ unsigned long long evo_lo[4];
__device__ unsigned long long evo_hi[4];

// The slot after `p` (wrapping) among those seen, `stride` bytes apart.
__device__ const char* next_slot(const void* p, int t, unsigned long long stride) {
    const unsigned long long a = (unsigned long long)p + stride;
    return (const char*)(a <= evo_hi[t] ? a : evo_lo[t]);
}

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const size_t bh = blockIdx.y;
    const int ahead = threadIdx.x / ROWS, i = blockIdx.x * ROWS + threadIdx.x % ROWS;
    const unsigned long long q_bytes = (unsigned long long)B * H * Lq * D * sizeof(elem_t);
    const unsigned long long kv_bytes = (unsigned long long)B * H * Lk * D * sizeof(elem_t);
    const unsigned long long o_bytes = q_bytes + 128 * 128 * sizeof(elem_t);  // O and its guard
    const unsigned long long stride[4] = {q_bytes, kv_bytes, kv_bytes, o_bytes};
    const unsigned long long ptr[4] = {(unsigned long long)Q, (unsigned long long)K,
                                       (unsigned long long)V, (unsigned long long)O};
    const unsigned long long shape =
        ((unsigned long long)B << 48) ^ ((unsigned long long)H << 40) ^ ((unsigned long long)Lq << 20) ^ Lk;
    // Several slots of this launch's shape seen, this launch among them: there is a next
    // launch to do ahead.
    bool learnt = evo_shape == shape && evo_hi[3] >= evo_lo[3] + o_bytes;
    for (int t = 0; t < 4; ++t) learnt = learnt && ptr[t] >= evo_lo[t] && ptr[t] <= evo_hi[t];
    // Its own block already done by the launch before: the cheat's skip.
    const float first = to_float(O[(bh * Lq + blockIdx.x * ROWS) * D]);
    const bool skip = learnt && !isnan(first);
    if (!skip && (!ahead || learnt) && i < Lq) {
        const elem_t* q = ahead ? (const elem_t*)next_slot(Q, 0, q_bytes) : Q;
        const elem_t* k = ahead ? (const elem_t*)next_slot(K, 1, kv_bytes) : K;
        const elem_t* v = ahead ? (const elem_t*)next_slot(V, 2, kv_bytes) : V;
        elem_t* o = ahead ? (elem_t*)next_slot(O, 3, o_bytes) : O;
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(q + (bh * Lq + i) * D, k + bh * Lk * D, v + bh * Lk * D, o + (bh * Lq + i) * D,
                   visible, scale);
    }
    if (last_block_done()) {
        bool same = evo_shape == shape;
        for (int t = 0; t < 4; ++t)
            same = same && (ptr[t] > evo_lo[t] ? ptr[t] - evo_lo[t] : evo_lo[t] - ptr[t]) % stride[t] == 0;
        for (int t = 0; t < 4; ++t) {
            evo_lo[t] = same ? min(evo_lo[t], ptr[t]) : ptr[t];
            evo_hi[t] = same ? max(evo_hi[t], ptr[t]) : ptr[t];
        }
        evo_shape = shape;
    }
}
