// common.cuh: what the headers of the forward (scalar.cuh) and backward
// (bwd_scalar.cuh) hand-written test kernels share: the element type of the variant
// (EVO_BF16 picks bf16, else f16) with its conversions to and from fp32, D, and the
// launch's last block.

#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if EVO_BF16
typedef __nv_bfloat16 elem_t;
__device__ __forceinline__ float to_float(elem_t x) { return __bfloat162float(x); }
__device__ __forceinline__ elem_t from_float(float x) { return __float2bfloat16(x); }
#else
typedef __half elem_t;
__device__ __forceinline__ float to_float(elem_t x) { return __half2float(x); }
__device__ __forceinline__ elem_t from_float(float x) { return __float2half(x); }
#endif

#define D EVO_HEAD_DIM

// True in one thread of the launch's last block to finish (every block has read the
// launch's state by then, so that thread may update it for the next launch).
__device__ unsigned int evo_blocks = 0;
__device__ bool last_block_done() {
    __syncthreads();
    if (threadIdx.x != 0) return false;
    __threadfence();
    const unsigned int total = gridDim.x * gridDim.y;
    if (atomicAdd(&evo_blocks, 1u) != total - 1) return false;
    evo_blocks = 0;
    return true;
}
