// The gates' own device code: the input generator, the fp32 reference's row softmax,
// the row-by-row comparison of a kernel's output with that reference, the guard
// check, and the read pass that empties L2 before a timing. Compiled by NVRTC once per device (no template macros); every kernel here is
// launched by crates/gates/src/device/ and nothing here is timed.
//
// The generator is crates/gates/src/philox.rs on the device, bit for bit: Philox4x32-10
// over (element pair, tensor) keyed by the launch's 64-bit seed, four 16-bit uniforms
// per element summed and centred in integers, one f32 multiplication, one rounding
// to the 16-bit type (round to nearest even, as the host's `half` crate).

#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ void philox4x32_10(u32 c[4], u32 k0, u32 k1) {
    const u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) { k0 += W0; k1 += W1; }
        const u32 hi0 = __umulhi(M0, c[0]), lo0 = M0 * c[0];
        const u32 hi1 = __umulhi(M1, c[2]), lo1 = M1 * c[2];
        const u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
    }
}

__device__ __forceinline__ int centred_sum(u32 a, u32 b) {
    const u32 s = (a & 0xFFFFu) + (a >> 16) + (b & 0xFFFFu) + (b >> 16);
    return 2 * (int)s - 4 * 65535;
}

__device__ __forceinline__ unsigned short to_bits(float x, int bf16) {
    return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}

__device__ __forceinline__ float from_bits(unsigned short b, int bf16) {
    return bf16 ? __uint_as_float(((u32)b) << 16) : __half2float(__ushort_as_half(b));
}

// One tensor to draw: `n` elements of stream `tensor` keyed by `seed`, scaled by `scale`.
// Written as 16-bit bits to `dst16` and/or as their exact f32 values to `dst32` (either
// may be null); where `cmp16` is set, the drawn bits are compared with what it holds
// and each element that differs is counted in `*mismatches` (a kernel that wrote
// into its inputs).
struct DrawJob {
    u64 seed;
    u64 n;
    unsigned short* dst16;
    float* dst32;
    const unsigned short* cmp16;
    u32* mismatches;
    float scale;
    u32 tensor;
};

// grid (x: chunks, y: jobs); each thread draws element pairs in a grid-stride loop.
extern "C" __global__ void evo_draw(const DrawJob* jobs, int bf16) {
    const DrawJob job = jobs[blockIdx.y];
    const u64 pairs = (job.n + 1) / 2;
    u32 differ = 0;
    for (u64 p = blockIdx.x * (u64)blockDim.x + threadIdx.x; p < pairs;
         p += (u64)gridDim.x * blockDim.x) {
        u32 c[4] = {(u32)p, (u32)(p >> 32), job.tensor, 0u};
        philox4x32_10(c, (u32)job.seed, (u32)(job.seed >> 32));
        const int sums[2] = {centred_sum(c[0], c[1]), centred_sum(c[2], c[3])};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u64 i = 2 * p + h;
            if (i >= job.n) break;
            const unsigned short bits = to_bits(__fmul_rn((float)sums[h], job.scale), bf16);
            if (job.dst16) job.dst16[i] = bits;
            if (job.dst32) job.dst32[i] = from_bits(bits, bf16);
            if (job.cmp16) differ += job.cmp16[i] != bits;
        }
    }
    if (job.cmp16 && differ) atomicAdd(job.mismatches, differ);
}

// The reference's softmax, in place on S (fp32, `rows` rows of Lk scores, row r being
// query r % Lq): P = softmax(S * scale) over the keys [lo, hi) the row sees (the mask
// of kernels/ABI.md, written out here apart from the templates' kernels/mask.cuh), 0
// elsewhere and everywhere in a row that sees no key. One block per row; fp32 with the
// row max subtracted first.
extern "C" __global__ void evo_reference_softmax(float* S, int rows, int Lq, int Lk, int causal,
                                                 int diag, int wl, int wr, float scale) {
    __shared__ float red[32];
    const int r = blockIdx.x;
    if (r >= rows) return;
    float* s = S + (size_t)r * Lk;
    const long long d = (long long)(r % Lq) + diag;
    long long hi_ = Lk;
    if (causal) hi_ = min(hi_, d + 1);
    if (wr >= 0) hi_ = min(hi_, d + wr + 1);
    const int hi = (int)max(hi_, 0LL);
    const int lo = wl >= 0 ? (int)min(max(d - wl, 0LL), (long long)Lk) : 0;
    if (hi <= lo) {
        for (int j = threadIdx.x; j < Lk; j += blockDim.x) s[j] = 0.0f;
        return;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;

    float m = -__int_as_float(0x7f800000);
    for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) m = fmaxf(m, s[j] * scale);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < warps; ++w) m = fmaxf(m, red[w]);
    __syncthreads();

    float l = 0.0f;
    for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) {
        const float e = expf(s[j] * scale - m);
        s[j] = e;
        l += e;
    }
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) red[warp] = l;
    __syncthreads();
    l = 0.0f;
    for (int w = 0; w < warps; ++w) l += red[w];
    const float inv = 1.0f / l;
    for (int j = threadIdx.x; j < Lk; j += blockDim.x) s[j] = j >= lo && j < hi ? s[j] * inv : 0.0f;
}

// What one row of a kernel's output looks like against the reference: the sums of the
// relative Frobenius error, the largest error (a NaN counts as infinite; ties go to the
// first column) with its column and values, and the columns still holding the poison
// or holding another NaN/Inf (how many, and the first).
struct RowStat {
    double diff_sq;
    double ref_sq;
    double max_abs;
    float got;
    float expected;
    int worst_col;
    int unwritten;
    int first_unwritten;
    int nonfinite;
    int first_nonfinite;
    int pad;
};

// One warp per row: `O` (16-bit, rows x D), `ref` (fp32, rows x D) -> `out[row]`.
extern "C" __global__ void evo_compare_rows(const unsigned short* O, const float* ref, RowStat* out,
                                            int rows, int D, unsigned int poison, int bf16) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const unsigned short* o = O + (size_t)row * D;
    const float* e = ref + (size_t)row * D;
    const unsigned short exp_mask = bf16 ? 0x7F80 : 0x7C00;
    double diff_sq = 0.0, ref_sq = 0.0, max_abs = -1.0;
    float got = 0.0f, expected = 0.0f;
    int worst = D, unwritten = 0, first_unwritten = D, nonfinite = 0, first_nonfinite = D;
    for (int c = lane; c < D; c += 32) {
        const unsigned short bits = o[c];
        const float g = from_bits(bits, bf16);
        const double d = fabs((double)g - (double)e[c]);
        diff_sq += d * d;
        ref_sq += (double)e[c] * (double)e[c];
        const double size = isnan(d) ? __longlong_as_double(0x7ff0000000000000ll) : d;
        if (size > max_abs) { max_abs = size; got = g; expected = e[c]; worst = c; }
        if (bits == poison) {
            ++unwritten;
            first_unwritten = min(first_unwritten, c);
        } else if ((bits & exp_mask) == exp_mask) {
            ++nonfinite;
            first_nonfinite = min(first_nonfinite, c);
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        diff_sq += __shfl_xor_sync(0xffffffffu, diff_sq, off);
        ref_sq += __shfl_xor_sync(0xffffffffu, ref_sq, off);
        unwritten += __shfl_xor_sync(0xffffffffu, unwritten, off);
        nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, off);
        first_unwritten = min(first_unwritten, __shfl_xor_sync(0xffffffffu, first_unwritten, off));
        first_nonfinite = min(first_nonfinite, __shfl_xor_sync(0xffffffffu, first_nonfinite, off));
        const double m2 = __shfl_xor_sync(0xffffffffu, max_abs, off);
        const int w2 = __shfl_xor_sync(0xffffffffu, worst, off);
        const float g2 = __shfl_xor_sync(0xffffffffu, got, off);
        const float e2 = __shfl_xor_sync(0xffffffffu, expected, off);
        if (m2 > max_abs || (m2 == max_abs && w2 < worst)) {
            max_abs = m2; worst = w2; got = g2; expected = e2;
        }
    }
    if (lane == 0) {
        RowStat s;
        s.diff_sq = diff_sq;
        s.ref_sq = ref_sq;
        s.max_abs = max_abs;
        s.got = got;
        s.expected = expected;
        s.worst_col = worst;
        s.unwritten = unwritten;
        s.first_unwritten = first_unwritten;
        s.nonfinite = nonfinite;
        s.first_nonfinite = first_nonfinite;
        s.pad = 0;
        out[row] = s;
    }
}

// dst[n][D] = src[rows[n]][D]: rows of the reference brought back for the host.
extern "C" __global__ void evo_gather_rows(const float* src, const unsigned int* rows, float* dst,
                                           int n, int D) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * D;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[(size_t)rows[i / D] * D + i % D];
}

// Counts the 32-bit words of `count` guard regions (each `words` long, `stride` words
// apart from `base`) that no longer hold `pattern`, into `*breached`.
extern "C" __global__ void evo_check_guards(const u32* base, u64 stride, int count, int words,
                                            u32 pattern, u32* breached) {
    u32 bad = 0;
    for (int g = blockIdx.y; g < count; g += gridDim.y) {
        const u32* region = base + (size_t)g * stride;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
            bad += region[i] != pattern;
    }
    if (bad) atomicAdd(breached, bad);
}

// Reads `words` 16-byte words of `buf` and keeps nothing: FAST's L2 flush. A read pass
// over twice the L2's size evicts every line a timed launch could find (its inputs,
// drawn just before) and leaves L2 holding only clean lines of `buf`. A write pass
// (a memset) would evict them too, but would leave L2 full of dirty lines, whose
// write-back to memory then lands in the timed launches: up to 50 MB on an H100, which
// cost a grouped decode launch 9.7 us of 188 (run D4 of
// experiments/2026-11-25-h100-decode-2), and cuDNN's the same. The store is never taken (no word xors to the key) but depends on every
// load, so none can be dropped.
extern "C" __global__ void evo_read_over(const uint4* buf, u64 words, u32 key, u32* sink) {
    u32 acc = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < words;
         i += (u64)gridDim.x * blockDim.x) {
        const uint4 v = buf[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == key) sink[0] = acc;
}
