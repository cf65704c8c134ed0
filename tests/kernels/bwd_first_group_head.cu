// bwd_first_group_head.cu: dK and dV from the first query head of each K/V head's
// group only (must FAIL GREEN, on the grouped-head cases).
//
// With H / Hkv query heads reading one K/V head, that head's dK and dV are the sums
// over all of them; this kernel drops every query head but the first. Right whenever
// H == Hkv, so only GREEN's grouped cases (kv=...) catch it.
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_first_group_head.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

#define DEFECTS Defects{/*no_dpsum=*/false, /*first_group_head=*/true}
EVO_BWD_KERNEL(evo_attention_bwd_pre) { dpsum_row(EVO_BWD_ARGS); }
EVO_BWD_KERNEL(evo_attention_bwd) { key_grads(EVO_BWD_ARGS, DEFECTS); }
EVO_BWD_KERNEL(evo_attention_bwd_dq) { query_grads(EVO_BWD_ARGS, DEFECTS); }
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
