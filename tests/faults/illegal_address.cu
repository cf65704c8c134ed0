// illegal_address.cu: a planted fault for the fault drill (`evo evolve --plant-faults`).
//
// Follows kernels/ABI.md so it loads like any candidate, then writes far outside O:
// the launch ends with CUDA_ERROR_ILLEGAL_ADDRESS, which poisons the whole context.
// The search must record `runtime_failed` for it, replace the worker, and go on.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if EVO_BF16
typedef __nv_bfloat16 elem_t;
#else
typedef __half elem_t;
#endif

extern "C" __constant__ int evo_geometry[6] = {64, 64, 0, 1, 0, 0};

extern "C" __global__ void evo_attention_fwd(const elem_t* Q, const elem_t* K, const elem_t* V,
                                             elem_t* O, float* ws_o, float* ws_lse, int B, int H,
                                             int Lq, int Lk, int causal, float scale) {
    // 2^40 elements past O: no allocation reaches there.
    O[(size_t(1) << 40) + threadIdx.x] = Q[threadIdx.x];
}
