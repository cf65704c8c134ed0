// fa3-bwd (genomes/fa3-bwd.toml; at D256 genomes/fa3-bwd-d256.toml) with the stage-arrive
// experiment on (EVO_STAGE_ARRIVE, kernels/NOTES.md §18), as a hand-written backward module
// that `evo gate` takes: the gates define EVO_HEAD_DIM and EVO_BF16, this file the other
// macros as the host defines them for those genomes (`evo compile GENOME --head-dim D
// --emit defines`; the template's static_assert checks the shared-memory plan), then
// includes the Hopper backward template's files in the order the host joins them.
// ARRIVE_STAGES sets the Q/dO ring (3, fa3-bwd's; fa3-bwd-arrive-s2.cu sets 2).
//
// Usage (repository root, a GPU): evo gate --source experiments/2026-11-27-h100-bwd-search/arrive/fa3-bwd-arrive.cu --time anchors

// The template defines these two; declared here, so that the gates read this file as a
// backward module of the second ABI.
extern "C" __constant__ int evo_abi[1];
extern "C" __constant__ int evo_pass[1];

#ifndef ARRIVE_STAGES
#define ARRIVE_STAGES 3
#endif
#define EVO_BLOCK_M 64
#define EVO_CONSUMER_WGS 2
#define EVO_EXP2 1
#define EVO_DQ_SEPARATE 0
#define EVO_DQ_BULK 1
#define EVO_PRODUCER_REGS 32
#define EVO_DQ_SMEM_BYTES 0
#if EVO_HEAD_DIM == 256
// fa3-bwd-d256: two warpgroups share 64 keys, one stage.
#define EVO_BLOCK_N 64
#define EVO_DKV_COLUMNS 1
#define EVO_STAGES 1
#define EVO_SMEM_BYTES 231168
#else
#define EVO_BLOCK_N 128
#define EVO_DKV_COLUMNS 0
#define EVO_STAGES ARRIVE_STAGES
#if ARRIVE_STAGES == 2
#define EVO_SMEM_BYTES (EVO_HEAD_DIM == 64 ? 133376 : 198912)
#else
#define EVO_SMEM_BYTES (EVO_HEAD_DIM == 64 ? 150272 : 232192)
#endif
#endif
#define EVO_STAGE_ARRIVE 1

#include "../../../kernels/mask.cuh"
#include "../../../kernels/mma.cuh"
#include "../../../kernels/sm90.cuh"
#include "../../../kernels/attention_bwd_sm90.cu"
#include "../../../kernels/attention_bwd_common.cuh"
#include "../../../kernels/attention_bwd_sm90_wgmma.cuh"
#include "../../../kernels/attention_bwd_sm90_kernel.cuh"
