// bwd_no_dpsum.cu: dS = P ∘ dP, the dpsum term dropped (must FAIL GREEN).
//
// dS = P ∘ (dP - dpsum) is the softmax's Jacobian; without dpsum every dS of a row is
// off by P·dpsum, so dQ and dK are wrong by as much as they are large (dV, which
// needs no dS, stays right).
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_no_dpsum.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

#define DEFECTS Defects{/*no_dpsum=*/true, /*first_group_head=*/false}
EVO_BWD_KERNEL(evo_attention_bwd_pre) { dpsum_row(EVO_BWD_ARGS); }
EVO_BWD_KERNEL(evo_attention_bwd) { key_grads(EVO_BWD_ARGS, DEFECTS); }
EVO_BWD_KERNEL(evo_attention_bwd_dq) { query_grads(EVO_BWD_ARGS, DEFECTS); }
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
