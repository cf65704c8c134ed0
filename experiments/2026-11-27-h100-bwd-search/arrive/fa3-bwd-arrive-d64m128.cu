// fa3-bwd-arrive.cu with FlashAttention-3's D64 tile: 128 query rows a step, a Q/dO ring of
// two stages (three do not fit shared memory at 128 rows), the stage-arrive producer on. At
// D96, D128 and D256 it is fa3-bwd-arrive.cu (a 128-row step does not fit the registers there).
// The D64 defines are those `evo compile GENOME --head-dim 64 --emit defines` gives for
// fa3-bwd-s2.toml with block_m = 128.
// Usage (repository root, a GPU): evo gate --source experiments/2026-11-27-h100-bwd-search/arrive/fa3-bwd-arrive-d64m128.cu --time anchors
#if EVO_HEAD_DIM == 64
extern "C" __constant__ int evo_abi[1];
extern "C" __constant__ int evo_pass[1];
#define EVO_BLOCK_M 128
#define EVO_BLOCK_N 128
#define EVO_CONSUMER_WGS 2
#define EVO_STAGES 2
#define EVO_EXP2 1
#define EVO_DQ_SEPARATE 0
#define EVO_DQ_BULK 1
#define EVO_PRODUCER_REGS 32
#define EVO_DKV_COLUMNS 0
#define EVO_SMEM_BYTES 199936
#define EVO_DQ_SMEM_BYTES 0
#define EVO_STAGE_ARRIVE 1
#include "../../../kernels/mask.cuh"
#include "../../../kernels/mma.cuh"
#include "../../../kernels/sm90.cuh"
#include "../../../kernels/attention_bwd_sm90.cu"
#include "../../../kernels/attention_bwd_common.cuh"
#include "../../../kernels/attention_bwd_sm90_wgmma.cuh"
#include "../../../kernels/attention_bwd_sm90_kernel.cuh"
#else
#include "fa3-bwd-arrive.cu"
#endif
