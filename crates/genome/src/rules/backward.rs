//! The rules of the backward family (`ampere_bwd`, kernels/attention_bwd.cu): how the
//! warps divide the keys (main kernel) and the query rows (dq kernel) among mma.sync's
//! 16-row fragments, and each kernel's registers and shared memory.
//!
//! The backward runs as up to four kernels; two of them (main, and dq when `dq_mode =
//! "separate"`) carry the design, and each must fit the device on its own.

use super::{Report, Rule};
use crate::budget::{bwd_dq_accumulators, bwd_main_accumulators, SmemPlan, BWD_REGISTER_HEADROOM};
use crate::genes::{DqMode, Genome};
use crate::problem::HeadDim;
use crate::target::Target;

/// Every backward rule, each failure reported to `out`.
pub(super) fn check(g: &Genome, head_dim: HeadDim, target: Target, out: &mut impl Report) {
    if g.dq_mode == DqMode::TmaReduce {
        out.fail(
            Rule::TmaReduceNeedsHopperBwd,
            || "family = \"ampere_bwd\" with dq_mode = \"tma_reduce\"".into(),
            || {
                "set dq_mode = \"atomic\" or \"separate\", or family = \"hopper_bwd\" (on \
                 sm_90)"
                    .into()
            },
        );
    }
    let warps = g.warps.get();
    let slice = 16 * warps;
    if !g.block_n.get().is_multiple_of(slice) {
        out.fail(
            Rule::BwdKeysPerWarp,
            || {
                format!(
                    "block_n = {} is not a multiple of 16 x warps = {slice}",
                    g.block_n
                )
            },
            || {
                format!(
                    "raise block_n to a multiple of {slice}, or lower warps to at most {}",
                    largest_warps(g.block_n.get())
                )
            },
        );
    }
    // With atomic dQ the main kernel's warps split a step's rows for dQ += dS·K in
    // whichever way the template likes (every block_m is whole 16-row slices), so
    // only the dq kernel, whose warps own rows for the whole loop, has a rule.
    if g.dq_mode == DqMode::Separate && !g.block_m.get().is_multiple_of(slice) {
        out.fail(
            Rule::BwdDqRowsPerWarp,
            || {
                format!(
                    "dq_mode = \"separate\" with block_m = {} not a multiple of 16 x warps = \
                     {slice}",
                    g.block_m
                )
            },
            || {
                format!(
                    "raise block_m to a multiple of {slice}, lower warps to at most {}, or \
                     set dq_mode = \"atomic\"",
                    largest_warps(g.block_m.get())
                )
            },
        );
    }

    let limit = target.regs_per_thread();
    let main = bwd_main_accumulators(g, head_dim);
    if main + BWD_REGISTER_HEADROOM > limit {
        out.fail(
            Rule::RegisterFile,
            || {
                format!(
                    "the main kernel's dK and dV are {main} fp32 registers per thread (2 x \
                     block_n = {} x D = {head_dim} over {warps} warps); with \
                     {BWD_REGISTER_HEADROOM} for a step's fragments that exceeds {limit}",
                    g.block_n
                )
            },
            || "raise warps, or lower block_n".into(),
        );
    }
    let dq = bwd_dq_accumulators(g, head_dim);
    if dq + BWD_REGISTER_HEADROOM > limit {
        out.fail(
            Rule::RegisterFile,
            || {
                format!(
                    "the dq kernel's dQ is {dq} fp32 registers per thread (block_m = {} x D = \
                     {head_dim} over {warps} warps); with {BWD_REGISTER_HEADROOM} for a \
                     step's fragments that exceeds {limit}",
                    g.block_m
                )
            },
            || "raise warps, lower block_m, or set dq_mode = \"atomic\"".into(),
        );
    }

    let limit = target.smem_per_block();
    let main = SmemPlan::bwd_main(g, head_dim);
    if main.total() > limit {
        out.fail(
            Rule::SharedMemory,
            || {
                format!(
                    "the main kernel's {} bytes of shared memory (K/V {} + Q/dO ring {} + \
                     lse/dpsum {} + dS {}) at D = {head_dim} exceed {limit} bytes on {target}",
                    main.total(),
                    main.kv,
                    main.q,
                    main.stats,
                    main.s_p
                )
            },
            || "lower stages, block_n or block_m, or use smem_layout = \"swizzled\"".into(),
        );
    }
    let dq = SmemPlan::bwd_dq(g, head_dim);
    if dq.total() > limit {
        out.fail(
            Rule::SharedMemory,
            || {
                format!(
                    "the dq kernel's {} bytes of shared memory (Q/dO {} + K/V ring {} + \
                     lse/dpsum {}) at D = {head_dim} exceed {limit} bytes on {target}",
                    dq.total(),
                    dq.q,
                    dq.kv,
                    dq.stats
                )
            },
            || "lower stages, block_m or block_n, or set dq_mode = \"atomic\"".into(),
        );
    }
}

/// The most warps (of 1, 2, 4, 8) that split `rows` into whole 16-row slices.
fn largest_warps(rows: u32) -> u32 {
    [8, 4, 2, 1]
        .into_iter()
        .find(|w| rows.is_multiple_of(16 * w))
        .unwrap_or(1)
}
