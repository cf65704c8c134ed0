// The element type and the mma.sync-era building blocks that do not depend on a
// template's tile sizes: f16/bf16 conversions, the exponentials, ldmatrix, mma.sync
// m16n8k16, cp.async, the tile swizzle. The host prepends this file (after
// kernels/mask.cuh) to every template: the Ampere forward (kernels/attention.cu) and
// backward (kernels/attention_bwd.cu) use all of it, the Hopper ones
// (kernels/attention_sm90.cu, kernels/attention_bwd_sm90.cu, which add kernels/sm90.cuh)
// the element type, the conversions, the exponentials and smem_addr; what a template
// does not call compiles to nothing. It reads EVO_BF16 only.
// NVRTC only: cuda_fp16.h and cuda_bf16.h, no std headers.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if EVO_BF16
typedef __nv_bfloat16 elem_t;
typedef __nv_bfloat162 elem2_t;
#define EVO_MMA_TYPE "bf16"
#else
typedef __half elem_t;
typedef __half2 elem2_t;
#define EVO_MMA_TYPE "f16"
#endif

namespace evo {

// ------------------------------------------------------------ elements

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float to_float(elem_t x) {
#if EVO_BF16
  return __bfloat162float(x);
#else
  return __half2float(x);
#endif
}
__device__ __forceinline__ float2 to_float2(elem2_t x) {
#if EVO_BF16
  return __bfloat1622float2(x);
#else
  return __half22float2(x);
#endif
}
__device__ __forceinline__ elem_t from_float(float x) {
#if EVO_BF16
  return __float2bfloat16_rn(x);
#else
  return __float2half_rn(x);
#endif
}
__device__ __forceinline__ elem2_t from_float2(float lo, float hi) {
#if EVO_BF16
  return __floats2bfloat162_rn(lo, hi);
#else
  return __floats2half2_rn(lo, hi);
#endif
}
// Two values as one .b32 mma operand register: `lo` is the lower column.
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  elem2_t v = from_float2(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

// ------------------------------------------------------------ exponentials

// 2^x as one MUFU.EX2: exp2f without fast-math adds denormal scaling around it, and
// flushing results below 2^-126 to zero is harmless for softmax weights (ex2(-inf) = +0).
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// 2^x on the FMA pipe: n = round(x) by adding 1.5 * 2^23, 2^(x - n) by a degree-3
// polynomial on [-0.5, 0.5] (relative error 1.8e-4), n into the exponent bits. Taking
// every other exponential this way halves the MUFU work (16 per clock per SM).
__device__ __forceinline__ float ex2_poly(float x) {
  const float t = x + 12582912.0f, f = x - (t - 12582912.0f);
  const float p = fmaf(fmaf(fmaf(0.0546022821f, f, 0.2419248f), f, 0.6933166125f), f, 1.0f);
  return x < -126.0f ? 0.0f : __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

// ------------------------------------------------------------ PTX wrappers

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8k..8k+7 give the row addresses of matrix k.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// The same, each 8x8 matrix transposed on the way.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a (16x16, row) * b (16x8, col), fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." EVO_MMA_TYPE "." EVO_MMA_TYPE ".f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ldmatrix lane addressing (lane l, a 16x16 block of a row-major tile at rows r0, cols c0):
//  - "a" pattern: matrices (r0,c0) (r0+8,c0) (r0,c0+8) (r0+8,c0+8) -> row r0 + (l & 15),
//    col c0 + (l >> 4) * 8. Plain: the A operand of rows r0.. and k c0... Transposed: the
//    B operand of k rows r0.. (n = columns), {b0,b1} of n-tile c0, then of c0 + 8.
//  - "b" pattern: matrices (r0,c0) (r0,c0+8) (r0+8,c0) (r0+8,c0+8) -> row
//    r0 + (l & 7) + (l >> 4) * 8, col c0 + ((l >> 3) & 1) * 8. Plain: the B operand
//    of n rows r0.. (k = columns), {b0,b1} of n-tile r0, then of r0 + 8. Transposed: the
//    A operand of the transpose (rows = the tile's columns c0.., k = its rows r0..).
__device__ __forceinline__ int lm_row_a(int lane) { return lane & 15; }
__device__ __forceinline__ int lm_col_a(int lane) { return (lane >> 4) << 3; }
__device__ __forceinline__ int lm_row_b(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
__device__ __forceinline__ int lm_col_b(int lane) { return ((lane >> 3) & 1) << 3; }

// cp.async with zero-fill: an invalid source writes zeros and reads nothing (rows past
// the end of a sequence). .cg (bypass L1) exists only for 16 bytes.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  const int src_bytes = valid ? BYTES : 0;
  if (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "n"(BYTES), "r"(src_bytes));
  }
}

template <int BYTES> struct VecOf;
template <> struct VecOf<4> { typedef unsigned type; };
template <> struct VecOf<8> { typedef uint2 type; };
template <> struct VecOf<16> { typedef uint4 type; };

// Element (row, col) of a [rows][D] tile of 16-bit elements with row pitch PITCH, in
// layout LAYOUT (0 plain, 1 padded: the pitch carries the pad, 2 XOR-swizzled 16-byte
// chunks). Swizzled: chunk c of row r goes to c ^ (r & 7), so the 8 rows of an aligned
// 8-row block read at one logical chunk (ldmatrix) hit 8 different bank groups.
// col % 8 == 0 for vector and ldmatrix accesses, and a 4/8/16-byte vector never crosses
// a chunk.
//
// D = 96 (12 chunks a row): XOR with (r & 7) would send chunks 8..11 to 12..15, past
// the row. The swizzle stays in the row and conflict-free, in two parts:
//  - chunks 0..7 XOR (r & 7), as for every D. The 192-byte pitch puts odd rows 4 bank
//    groups (64 bytes) after even ones, so the 8 rows of an aligned block at logical
//    chunk c sit in group (c ^ (r & 7)) ^ 4 * (r & 1): 8 different groups.
//  - the tail, chunks 8..11, XOR ((r >> 1) & 3), which stays in 8..11: its group is
//    4 * (r & 1) + ((c ^ (r >> 1)) & 3), again 8 different groups for rows 0..7 of a
//    block (r & 1 picks the half, (r >> 1) & 3 the group in it).
template <int D, int PITCH, int LAYOUT>
__device__ __forceinline__ int tile_offset(int row, int col) {
  if constexpr (LAYOUT == 2) {
    constexpr int kTail = (D / 8) % 8;  // 0, or 4 at D = 96
    const int ch = col >> 3;
    const int sw = (kTail != 0 && ch >= D / 8 - kTail) ? ch ^ ((row >> 1) & (kTail - 1))
                                                       : ch ^ (row & 7);
    return row * PITCH + (sw << 3) + (col & 7);
  } else {
    return row * PITCH + col;
  }
}

}  // namespace evo
