//! The rules of the Hopper backward family (`hopper_bwd`, kernels/attention_bwd_sm90.cu):
//! the template's `static_assert`s, checked on the host first so that the search never
//! builds a kernel the template refuses. Its device (sm_90a), the query rows of a step
//! (`hopper_bwd_block_m`), its exponentials (`hopper_bwd_exp`), the split of dK and dV
//! over a pair of warpgroups (`dkv_split = "columns"`: `hopper_bwd_dkv_pairs`, two
//! consumer warpgroups; `hopper_bwd_dkv_columns`, halves of whole 64-column blocks), a
//! consumer's registers (`hopper_bwd_regs` in the template) and each kernel's shared
//! memory (the plans of `budget/hopper_bwd.rs`, which the template asserts equal to its
//! own). The template's other asserts hold by construction here: block_n is 64 per
//! consumer warpgroup, or per pair with the columns split (no gene of the family), the
//! macros' ranges are the genes' alleles, and setmaxnreg's budget is the forward's rule
//! ([`hopper_consumer_registers`]), which never asks the producer for registers it does
//! not free.

use super::{Report, Rule};
use crate::budget::{
    hopper_bwd_consumer_needs, hopper_bwd_split, hopper_consumer_registers, hopper_stored_columns,
    SmemPlan, HOPPER_BWD_ADDRESS_REGS,
};
use crate::genes::{ConsumerWgs, DkvSplit, ExpFn, Gene, Genome, ProducerRegs, Tile};
use crate::problem::HeadDim;
use crate::target::Target;

/// Every Hopper backward rule, each failure reported to `out`.
pub(super) fn check(g: &Genome, head_dim: HeadDim, target: Target, out: &mut impl Report) {
    if target != Target::Sm90 {
        out.fail(
            Rule::HopperNeedsSm90,
            || format!("family = \"hopper_bwd\" on {target}"),
            || "set family = \"ampere_bwd\", or target sm_90".into(),
        );
    }
    if !matches!(g.block_m, Tile::T64 | Tile::T128) {
        out.fail(
            Rule::HopperBwdBlockM,
            || format!("family = \"hopper_bwd\" with block_m = {}", g.block_m),
            || "set block_m = 64 or 128".into(),
        );
    }
    if g.exp == ExpFn::Exp2Fma {
        out.fail(
            Rule::HopperBwdExp,
            || "family = \"hopper_bwd\" with exp = \"exp2_fma\"".into(),
            || "set exp = \"exp2\" (or \"exp\")".into(),
        );
    }
    let columns = g.dkv_split == DkvSplit::Columns;
    if columns && g.consumer_wgs != ConsumerWgs::C2 {
        out.fail(
            Rule::HopperBwdDkvPairs,
            || {
                format!(
                    "dkv_split = \"columns\" with consumer_wgs = {} ({})",
                    g.consumer_wgs,
                    if g.consumer_wgs == ConsumerWgs::C1 {
                        "one warpgroup has no partner to share its keys with"
                    } else {
                        "a pair shares 64 keys and the third warpgroup would be alone"
                    }
                )
            },
            || "set consumer_wgs = 2, or dkv_split = \"keys\"".into(),
        );
    }
    let ds = hopper_stored_columns(head_dim);
    if columns && !ds.is_multiple_of(128) {
        out.fail(
            Rule::HopperBwdDkvColumns,
            || {
                format!(
                    "dkv_split = \"columns\" at D = {head_dim}: half of the {ds} stored \
                     columns is {} columns, not whole 64-column blocks",
                    ds / 2
                )
            },
            || {
                "set dkv_split = \"keys\" (at D = 64 one warpgroup's dK and dV fit its \
                 registers)"
                    .into()
            },
        );
    }

    let need = hopper_bwd_consumer_needs(g, head_dim);
    let budget = hopper_consumer_registers(g);
    if need > budget {
        let (bm, s) = (g.block_m.get(), hopper_bwd_split(g));
        out.fail(
            Rule::RegisterFile,
            || {
                format!(
                    "{need} registers per consumer thread (dK, dV {} + Sᵀ, dPᵀ {} + P {} + \
                     {HOPPER_BWD_ADDRESS_REGS} at D = {head_dim}, block_m = {bm}, dkv_split = \
                     \"{}\"{}) exceed the {budget} a consumer of {} warpgroups has with \
                     producer_regs = {}",
                    ds / s,
                    bm / s,
                    bm / 4 / s,
                    g.dkv_split,
                    if columns {
                        ": half the columns and half the step's rows a warpgroup"
                    } else {
                        ""
                    },
                    g.consumer_wgs,
                    g.allele_label(Gene::ProducerRegs)
                )
            },
            || {
                if head_dim == HeadDim::D256 && !columns {
                    // 64 keys' dK and dV over 256 columns are 256 registers a thread
                    // alone: only the columns split fits them.
                    format!(
                        "set dkv_split = \"columns\" with consumer_wgs = 2{}: at D = 256 a \
                         warpgroup's dK and dV alone are 256 registers a thread; split by \
                         columns, two warpgroups share 64 keys and each holds half the \
                         columns",
                        if g.producer_regs == ProducerRegs::None {
                            " and producer_regs = 24, 32 or 40"
                        } else {
                            ""
                        }
                    )
                } else {
                    let mut fixes = Vec::new();
                    if g.block_m == Tile::T128 {
                        fixes.push("lower block_m to 64".to_string());
                    }
                    if g.producer_regs == ProducerRegs::None {
                        fixes.push(
                            "set producer_regs to 24, 32 or 40 (setmaxnreg gives the \
                             consumers the producer's registers)"
                                .to_string(),
                        );
                    }
                    if g.consumer_wgs.get() > 2 {
                        fixes.push("lower consumer_wgs".to_string());
                    }
                    if fixes.is_empty() {
                        fixes.push("lower consumer_wgs or block_m".to_string());
                    }
                    fixes.join(", or ")
                }
            },
        );
    }

    let limit = target.smem_per_block();
    let main = SmemPlan::hopper_bwd_main(g, head_dim);
    if main.total() > limit {
        out.fail(
            Rule::SharedMemory,
            || {
                format!(
                    "the main kernel's {} bytes of shared memory (K/V {} + Q/dO ring {} + {} \
                     {} + dQ staging {} + lse/dpsum, barriers and alignment {}) at D = \
                     {head_dim} exceed {limit} bytes on {target}",
                    main.total(),
                    main.kv,
                    main.q,
                    if columns { "dSᵀ and Pᵀ" } else { "dSᵀ" },
                    main.s_p,
                    main.o,
                    main.stats
                )
            },
            || "lower stages, block_m or consumer_wgs".into(),
        );
    }
    let dq = SmemPlan::hopper_bwd_dq(g, head_dim);
    if dq.total() > limit {
        out.fail(
            Rule::SharedMemory,
            || {
                format!(
                    "the dq kernel's {} bytes of shared memory (Q/dO {} + K/V ring {} + \
                     lse/dpsum, barriers and alignment {}) at D = {head_dim} exceed {limit} \
                     bytes on {target}",
                    dq.total(),
                    dq.q,
                    dq.kv,
                    dq.stats
                )
            },
            || "lower stages or consumer_wgs, or set dq_mode = \"atomic\"".into(),
        );
    }
}
