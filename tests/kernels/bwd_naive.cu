// bwd_naive.cu: the correct reference backward (must PASS GREEN and FAST).
//
// The simplest right answer: every key, every row that sees it, fp32 throughout, no
// atomics (so it declares itself bitwise repeatable). A calibration point for the
// backward's tolerances, too.
//
// Hand-written under kernels/ABI.md, "The backward ABI": one thread per key (dK, dV)
// and per query row (dpsum, dQ), scalar fp32 (bwd_scalar.cuh); compiled per
// EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_naive.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

EVO_BWD_KERNEL(evo_attention_bwd_pre) { dpsum_row(EVO_BWD_ARGS); }
EVO_BWD_KERNEL(evo_attention_bwd) { key_grads(EVO_BWD_ARGS, Defects{}); }
EVO_BWD_KERNEL(evo_attention_bwd_dq) { query_grads(EVO_BWD_ARGS, Defects{}); }
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
