// hang.cu: a planted hang for the fault drill (`evo evolve --plant-faults`).
//
// Follows kernels/ABI.md, then spins on a global load that never changes. The
// volatile load keeps the compiler from deleting the loop. The worker never
// answers; the search must kill it after its timeout, record `timeout`, and go on.

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
    const volatile unsigned short* q = reinterpret_cast<const volatile unsigned short*>(Q);
    const unsigned short first = q[0];
    while (q[0] == first) {
    }
    O[threadIdx.x] = Q[threadIdx.x];
}
