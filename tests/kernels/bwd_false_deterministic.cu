// bwd_false_deterministic.cu: right, but declares evo_deterministic = {1} while it
// adds dQ into an fp32 accumulator with atomics in an order that varies from run to
// run (must FAIL GREEN).
//
// evo_deterministic promises bitwise-equal gradients on equal inputs (what a training
// run's reproducibility rests on). Here each query row adds the partial dQ of its
// blocks of 16 keys into the workspace's accumulator with atomicAdd, starting at a
// block chosen by the SM clock, so the fp32 sum is rounded in a different order each
// run; post converts it. GREEN runs a declared-deterministic kernel twice on the same
// inputs and compares the bits. (A case whose rows see at most 16 keys is repeatable
// by luck; the suite's longer rows are not.)
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_false_deterministic.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {1};  // the false claim
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, ROWS, ROWS};

#define KEY_BLOCK 16

EVO_BWD_KERNEL(evo_attention_bwd_pre) {
  const Bwd a = EVO_BWD_ARGS;
  dpsum_row(a);
  const int i = blockIdx.x * ROWS + threadIdx.x;
  if (i >= Lq) return;
  float* acc = a.dq_acc() + ((size_t)blockIdx.y * Lq + i) * D;
  for (int c = 0; c < D; ++c) acc[c] = 0.0f;
}
EVO_BWD_KERNEL(evo_attention_bwd) { key_grads(EVO_BWD_ARGS, Defects{}); }
EVO_BWD_KERNEL(evo_attention_bwd_dq) {
  const Bwd a = EVO_BWD_ARGS;
  const int i = blockIdx.x * ROWS + threadIdx.x;
  if (i >= Lq) return;
  const int lo = a.mask.lo(i), hi = a.mask.hi(i);
  if (hi <= lo) return;
  const int blocks = (hi - lo + KEY_BLOCK - 1) / KEY_BLOCK;
  unsigned int sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const unsigned int first = (unsigned int)(clock64() ^ (sm * 2654435761u)) % blocks;
  float* acc = a.dq_acc() + ((size_t)blockIdx.y * Lq + i) * D;
  for (int n = 0; n < blocks; ++n) {
    const int j0 = lo + ((first + n) % blocks) * KEY_BLOCK;
    float part[D];
    for (int c = 0; c < D; ++c) part[c] = 0.0f;
    query_grads_over(a, i, j0, min(j0 + KEY_BLOCK, hi), Defects{}, part);
    for (int c = 0; c < D; ++c) atomicAdd(&acc[c], part[c]);
  }
}
EVO_BWD_KERNEL(evo_attention_bwd_post) {
  const Bwd a = EVO_BWD_ARGS;
  const int i = blockIdx.x * ROWS + threadIdx.x;
  if (i >= Lq) return;
  const size_t row = (size_t)blockIdx.y * Lq + i;
  for (int c = 0; c < D; ++c) dQ[row * D + c] = from_float(a.dq_acc()[row * D + c] * scale);
}
