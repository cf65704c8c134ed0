//! Which rows of dQ, dK and dV a check of a large backward computes.
//!
//! The forward's rule, for query rows and key rows alike
//! ([`crate::reference::spread_rows`]): below
//! [`crate::reference::FULL_REFERENCE_MACS`] every row; above it, per head, the first, middle and last
//! row (the last lives in the partial tile when a length is not a multiple of the
//! tile) and random others, so every head is still looked at. Because lse is an
//! input, a key row of dK / dV needs only its column of the scores over the group's
//! query rows (Lq·D per key and query head), so sampled key rows stay cheap too.

use crate::reference::{sample_rows, spread_rows};
use evo_genome::Problem;

/// The dQ rows of query head `bh` (`b·H + h`) a check covers: the forward check's rows.
pub fn sample_query_rows(problem: &Problem, seed: u64, bh: usize) -> Vec<u32> {
    sample_rows(problem, seed, bh)
}

/// The dK / dV rows (keys) of K/V head `kv_head` (`b·Hkv + g`) a check covers.
pub fn sample_key_rows(problem: &Problem, seed: u64, kv_head: usize) -> Vec<u32> {
    spread_rows(
        problem,
        problem.kv_len as usize,
        seed ^ 0x6B65_7973 ^ (kv_head as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
    )
}
