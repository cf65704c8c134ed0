// bwd_skip_last_key.cu: computes everything but leaves the last key's dK and dV
// unwritten (must FAIL GREEN).
//
// Every element of dQ, dK and dV is written, a key no row sees included (with zeros);
// GREEN poisons the outputs before each call and finds the poison left in the last
// key's rows.
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_skip_last_key.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

EVO_BWD_KERNEL(evo_attention_bwd_pre) { dpsum_row(EVO_BWD_ARGS); }
EVO_BWD_KERNEL(evo_attention_bwd) {
  const bool last = blockIdx.x * ROWS + threadIdx.x == Lk - 1;
  key_grads(EVO_BWD_ARGS, Defects{}, /*write=*/!last);  // the defect
}
EVO_BWD_KERNEL(evo_attention_bwd_dq) { query_grads(EVO_BWD_ARGS, Defects{}); }
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
