// memo_pointer.cu: remembers the buffers it has computed into and returns at once
// when it meets them again, unless they are the buffers of its previous launch
// (must PASS GREEN, FAIL FAST).
//
// GREEN's two launches per case reuse one set of buffers, so the kernel computes
// there. FAST's sets rotate: from the second repeat on, every set's buffers are
// "known", the kernel skips, and the poison FAST wrote before the repeat remains.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see.
// Expected verdicts: memo_pointer.expected.toml beside this file.

#include "scalar.cuh"
#define ROWS 64

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

#define MEMO 256
__device__ unsigned long long evo_memo[MEMO];  // (O pointer ^ shape) of launches seen
__device__ unsigned int evo_memo_len = 0;
__device__ unsigned long long evo_last = 0;

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    const unsigned long long key = (unsigned long long)O ^ ((unsigned long long)Lq << 40) ^
                                   ((unsigned long long)Lk << 20) ^ (B * 64 + H) ^ causal;
    bool seen = false;
    const unsigned int n = min(*(volatile unsigned int*)&evo_memo_len, (unsigned int)MEMO);
    for (unsigned int s = 0; s < n; ++s) seen |= evo_memo[s] == key;
    const bool skip = seen && key != evo_last;  // the cheat
    if (!skip && i < Lq) {
        const int visible = causal ? min(i + 1, Lk) : Lk;
        attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D,
                   O + (bh * Lq + i) * D, visible, scale);
    }
    if (last_block_done()) {
        if (!seen && evo_memo_len < MEMO) evo_memo[evo_memo_len++] = key;
        evo_last = key;
    }
}
