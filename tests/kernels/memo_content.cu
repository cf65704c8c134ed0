// memo_content.cu: keeps the outputs it computed in a device table keyed by a hash of
// its inputs (the shape and 256 elements of each of Q, K and V at fixed positions), and
// copies the stored output when the same inputs come back (must PASS GREEN, and FAST
// must time it doing the work: within noise of memo_content_twin.cu, its code without
// the copy).
//
// Against a FAST that refilled its input sets from a pool of `sets + 1` entries, every
// timed launch from the second repeat on met inputs it had met before: the kernel was
// timed as a copy, with right outputs. FAST now draws every launch's inputs on the
// device from a key no launch can know, so the table never hits.

// Hand-written under kernels/ABI.md: one thread per query row, scalar fp32, online
// softmax (scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the
// gates see. Expected verdicts: memo_content.expected.toml beside this file.

#include "scalar.cuh"

// memo_content_twin.cu includes this file with MEMO_COPIES 0.
#ifndef MEMO_COPIES
#define MEMO_COPIES 1
#endif

#define ROWS 64
// Outputs of up to this many elements are kept (the seed shape's, at D64 and D128).
#define KEPT_ELEMS (8 * 512 * 128)
#define ENTRIES 128
#define PROBES 8
#define SAMPLES 256

// {block_m, threads_per_block, smem_bytes, split_kv, combine_rows_per_block, combine_threads}
extern "C" __constant__ int evo_geometry[6] = {ROWS, ROWS, 0, 1, 0, 0};

// The table: a key per entry (0: empty) and the output stored under it. Keys are
// published only by a launch's last block, so every block of a launch sees the same.
__device__ unsigned long long evo_keys[ENTRIES];
__device__ elem_t evo_table[ENTRIES][KEPT_ELEMS];

__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// An order-free hash of SAMPLES elements of `x` (n of them) at fixed positions.
__device__ unsigned long long sample_hash(const elem_t* x, size_t n, unsigned long long salt) {
    const unsigned short* b = (const unsigned short*)x;
    unsigned long long h = 0;
    for (int s = threadIdx.x; s < SAMPLES; s += ROWS) {
        const size_t at = ((size_t)s * 2654435761ull) % n;
        h += mix((salt << 40) ^ (at << 16) ^ __ldcg(b + at));
    }
    return h;
}

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    __shared__ unsigned long long part[ROWS];
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const size_t bh = blockIdx.y;
    const size_t q_elems = (size_t)B * H * Lq * D, kv_elems = (size_t)B * H * Lk * D;
    part[threadIdx.x] = sample_hash(Q, q_elems, 1) + sample_hash(K, kv_elems, 2) +
                        sample_hash(V, kv_elems, 3);
    __syncthreads();
    unsigned long long key = mix(((unsigned long long)B << 56) ^ ((unsigned long long)H << 48) ^
                                 ((unsigned long long)Lq << 28) ^ ((unsigned long long)Lk << 4) ^
                                 causal);
    for (int t = 0; t < ROWS; ++t) key += part[t];
    key |= 1;  // 0 marks an empty entry
    // The entry holding this key, else the first empty one of the probes, else the home.
    const bool keeps = q_elems <= KEPT_ELEMS;
    int slot = -1, empty = -1;
    for (int p = 0; p < PROBES && keeps; ++p) {
        const int e = (key + p) % ENTRIES;
        const unsigned long long k = *(volatile unsigned long long*)&evo_keys[e];
        if (k == key) { slot = e; break; }
        if (k == 0 && empty < 0) empty = e;
    }
    const bool hit = MEMO_COPIES && slot >= 0;  // the cheat
    if (!hit) slot = empty >= 0 ? empty : (int)(key % ENTRIES);
    if (i < Lq) {
        elem_t* o = O + (bh * Lq + i) * D;
        elem_t* stored = evo_table[slot] + (bh * Lq + i) * D;
        if (hit) {
            for (int c = 0; c < D; ++c) o[c] = stored[c];
        } else {
            const int visible = causal ? min(i + 1, Lk) : Lk;
            attend_row(Q + (bh * Lq + i) * D, K + bh * Lk * D, V + bh * Lk * D, o, visible, scale);
            if (keeps) for (int c = 0; c < D; ++c) stored[c] = o[c];
        }
    }
    if (last_block_done() && keeps && !hit) {
        __threadfence();
        evo_keys[slot] = key;
    }
}
