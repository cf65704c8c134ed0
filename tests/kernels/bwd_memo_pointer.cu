// bwd_memo_pointer.cu: remembers the buffers it has computed into and, when a call
// comes back to them (other than the call just before), returns at once, leaving
// whatever those buffers hold (must PASS GREEN, FAIL FAST).
//
// A backward that replays the gradients of an earlier call with the same pointers is
// right whenever the caller's inputs did not change. GREEN gives every call fresh
// buffers and fresh inputs. FAST's sets keep their buffers from repeat to repeat and
// draw new inputs into them (and poison the outputs) before each repeat: from the
// second repeat on every set is "known", the kernel skips, and the check of the last
// repeat's calls finds the poison.
//
// It declares evo_deterministic = {0}: GREEN's repeat of a call would otherwise meet
// buffers it has seen.
// Hand-written under kernels/ABI.md, "The backward ABI": bwd_naive.cu's design
// (bwd_scalar.cuh); compiled per EVO_HEAD_DIM and EVO_BF16 like every kernel the gates see.
// Expected verdicts: bwd_memo_pointer.expected.toml beside this file.

#include "bwd_scalar.cuh"

extern "C" __constant__ int evo_abi[1] = {2};
extern "C" __constant__ int evo_pass[1] = {1};
extern "C" __constant__ int evo_deterministic[1] = {0};
// {block_n, main_threads, main_smem, block_m, dq_threads, dq_smem,
//  pre_rows, pre_threads, post_rows, post_threads}
extern "C" __constant__ int evo_bwd_geometry[10] = {ROWS, ROWS, 0, ROWS, ROWS, 0, ROWS, ROWS, 0, 0};

#define MEMO 256
__device__ unsigned long long evo_memo[MEMO];  // (output pointers ^ shape) of calls seen
__device__ unsigned int evo_memo_len = 0;
__device__ unsigned long long evo_last = 0;

// The call's key: its output buffers and its problem.
#define MEMO_KEY                                                                           \
  ((unsigned long long)dQ ^ ((unsigned long long)dK << 1) ^ ((unsigned long long)Lq << 40) ^ \
   ((unsigned long long)Lk << 20) ^ (unsigned long long)(((B * 64 + H) * 64 + Hkv) * 8 + causal) ^ \
   ((unsigned long long)(diag & 0xffff) << 56) ^ ((unsigned long long)(window_left & 0xff) << 48) ^ \
   ((unsigned long long)(window_right & 0xff) << 32))

// Seen before, and not by the call just before: the cheat. Read by every kernel of a
// call before the last one (dq) updates the memo.
__device__ bool skip(unsigned long long key, bool* seen) {
  const unsigned int n = min(*(volatile unsigned int*)&evo_memo_len, (unsigned int)MEMO);
  *seen = false;
  for (unsigned int s = 0; s < n; ++s) *seen |= evo_memo[s] == key;
  return *seen && key != *(volatile unsigned long long*)&evo_last;
}

EVO_BWD_KERNEL(evo_attention_bwd_pre) {
  bool seen;
  if (!skip(MEMO_KEY, &seen)) dpsum_row(EVO_BWD_ARGS);
}
EVO_BWD_KERNEL(evo_attention_bwd) {
  bool seen;
  if (!skip(MEMO_KEY, &seen)) key_grads(EVO_BWD_ARGS, Defects{});
}
EVO_BWD_KERNEL(evo_attention_bwd_dq) {
  const unsigned long long key = MEMO_KEY;
  bool seen;
  if (!skip(key, &seen)) query_grads(EVO_BWD_ARGS, Defects{});
  if (last_block_done()) {
    if (!seen && evo_memo_len < MEMO) evo_memo[evo_memo_len++] = key;
    evo_last = key;
  }
}
EVO_BWD_KERNEL(evo_attention_bwd_post) {}
