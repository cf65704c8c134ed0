// scalar.cuh: what the hand-written test kernels that include it share — the element
// type of the variant, the scalar fp32 attention of one query row, the launch's last
// block, and bursts of back-to-back launches told by the device clock. Compiled into
// each kernel (every .cu is its own module; `evo gate` puts a kernel's folder on the
// include path).

#pragma once
// The element type, its conversions, D and the launch's last block.
#include "common.cuh"

// One query row, keys [0, visible), into o[0, D): fp32, the online softmax with its
// running max; `off` is added to every output (0: right).
__device__ void attend_row(const elem_t* q, const elem_t* k, const elem_t* v, elem_t* o,
                           int visible, float scale, float off = 0.0f) {
    float qf[D], acc[D];
    for (int c = 0; c < D; ++c) { qf[c] = to_float(q[c]); acc[c] = 0.0f; }
    float m = -__int_as_float(0x7f800000), l = 0.0f;
    for (int j = 0; j < visible; ++j) {
        float s = 0.0f;
        for (int c = 0; c < D; ++c) s += qf[c] * to_float(k[j * D + c]);
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * corr + p;
        m = m_new;
        for (int c = 0; c < D; ++c) acc[c] = acc[c] * corr + p * to_float(v[j * D + c]);
    }
    for (int c = 0; c < D; ++c) o[c] = from_float(acc[c] / l + off);
}

// Bursts: a launch that starts within 20 µs of the last one's end belongs to its burst.
// FAST's repeats are bursts; GREEN's launches, each after a host round trip, never are.
__device__ unsigned long long evo_last_end = 0;  // %globaltimer at the last launch's end, ns
__device__ unsigned long long evo_bursts = 0;    // bursts of more than one launch so far
__device__ bool evo_in_burst = false;

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct Burst {
    bool follows;                // this launch follows another inside a burst
    unsigned long long number;   // the burst it belongs to (one it begins is counted now)
};

__device__ Burst burst_at_start() {
    const unsigned long long last = *(volatile unsigned long long*)&evo_last_end;
    Burst b;
    b.follows = last != 0 && now_ns() < last + 20000;
    b.number = *(volatile unsigned long long*)&evo_bursts +
               (b.follows && !*(volatile bool*)&evo_in_burst ? 1 : 0);
    return b;
}

// Called by the thread `last_block_done()` chose.
__device__ void burst_at_end(Burst b) {
    evo_bursts = b.number;
    evo_in_burst = b.follows;
    evo_last_end = now_ns();
}
