// bwd_past_dk.cu: right, but writes one row of zeros past the end of dK (must FAIL
// GREEN).
//
// Nothing outside the rows < Lk of dK and dV, the rows < Lq of dQ and the workspace is
// the kernel's; GREEN follows every buffer with a guard region and reads it back.
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_past_dk.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

EVO_BWD_KERNEL(evo_attention_bwd_pre) { dpsum_row(EVO_BWD_ARGS); }
EVO_BWD_KERNEL(evo_attention_bwd) {
  key_grads(EVO_BWD_ARGS, Defects{});
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {  // the defect
    const size_t end = (size_t)B * Hkv * Lk * D;
    for (int c = 0; c < D; ++c) dK[end + c] = from_float(0.0f);
  }
}
EVO_BWD_KERNEL(evo_attention_bwd_dq) { query_grads(EVO_BWD_ARGS, Defects{}); }
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
