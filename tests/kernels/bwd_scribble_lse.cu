// bwd_scribble_lse.cu: right, but once its dQ is done it overwrites the first element
// of lse (must FAIL GREEN).
//
// lse is an input, the forward's: a backward that uses it as scratch corrupts what the
// caller may still read (a second backward through the same forward, a recompute).
// GREEN reads every input back after each call.
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_scribble_lse.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

EVO_BWD_KERNEL(evo_attention_bwd_pre) { dpsum_row(EVO_BWD_ARGS); }
EVO_BWD_KERNEL(evo_attention_bwd) { key_grads(EVO_BWD_ARGS, Defects{}); }
EVO_BWD_KERNEL(evo_attention_bwd_dq) {
  query_grads(EVO_BWD_ARGS, Defects{});
  // The defect: row 0 of head 0 is this thread's, done, and no other thread reads it.
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    ((float*)lse)[0] = lse[0] == 1234.5f ? 4321.5f : 1234.5f;
  }
}
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
