//! Validity rules: the only place that decides whether a genome can exist on a device.
//!
//! A rule excludes a genome only when it cannot work: a device resource limit
//! (shared memory, the register file), or a combination that has no meaning
//! (P in registers needs a fragment layout that is also an A operand). Each rule
//! is named, explains itself, and says how to fix the genome. Anything the
//! template merely lacks is a template bug, never a rule.

use crate::genes::{
    ConsumerWgs, Family, Genome, Math, OStore, Overlap, Residence, SmemLayout, Switch, WgSplit,
};
use crate::problem::HeadDim;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::fmt;

// The budgets the rules check live in `crate::budget`; their paths under `rules` stay.
pub use crate::budget::*;

/// The validity rules, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// P can stay in registers only when the C fragment of S *is* the A fragment of P.
    PRegsNeedsMma,
    /// An O accumulator in registers must be rescaled per row; the owner of a row must be known.
    ORegsNeedsKnownLayout,
    /// `wmma::load_matrix_sync` reads a pointer plus a leading dimension, never an XOR swizzle.
    SwizzleNeedsAddressedLoads,
    /// Register-resident mma state is owned by warps in whole 16-row slices.
    WarpRowsPerSlice,
    /// The accumulators that must live in registers fit in the register file of one thread.
    RegisterFile,
    /// The CTA's shared memory fits the device's per-block limit.
    SharedMemory,
    /// wgmma, setmaxnreg and the tensor-memory copy engine exist on sm_90 only.
    HopperNeedsSm90,
    /// Ping-pong alternates the GEMMs of two or more consumer warpgroups.
    PingpongNeedsTwoWarpgroups,
    /// Overlap across tiles needs a CTA that computes more than one tile.
    ChainedNeedsPersistent,
    /// A cluster merges 2 to 8 splits of one query block.
    ClusterCombineSplits,
    /// The cluster merge follows a tile's epilogue, which a chain folds into its stream.
    ClusterCombineNotChained,
    /// Splitting the K/V tiles among consumer warpgroups needs two or more of them.
    WgKeysNeedsTwoWarpgroups,
    /// Split by keys, each stage belongs to one warpgroup: stages a multiple of them.
    WgKeysStages,
    /// The keys split merges the warpgroups after a tile's stream, which a chain continues.
    WgKeysNotChained,
    /// Backward: each warp of the main kernel owns whole 16-key slices of the CTA's keys.
    BwdKeysPerWarp,
    /// Backward, separate dq kernel: each warp owns whole 16-row slices of the CTA's rows.
    BwdDqRowsPerWarp,
    /// Hopper backward: a step's query rows are the N of Sᵀ's wgmma and whole 64-row M
    /// units of dQ = dS·K.
    HopperBwdBlockM,
    /// Hopper backward: the template's exponential is `expf` or `exp2`.
    HopperBwdExp,
    /// The bulk reduce-add of `dq_mode = "tma_reduce"` is an sm_90 instruction that only
    /// the Hopper backward template uses.
    TmaReduceNeedsHopperBwd,
    /// Hopper backward, `dkv_split = "columns"`: the consumer warpgroups work in pairs.
    HopperBwdDkvPairs,
    /// Hopper backward, `dkv_split = "columns"`: each half of the stored columns is whole
    /// 64-column blocks.
    HopperBwdDkvColumns,
}

impl Rule {
    pub const ALL: [Rule; 21] = [
        Rule::PRegsNeedsMma,
        Rule::ORegsNeedsKnownLayout,
        Rule::SwizzleNeedsAddressedLoads,
        Rule::WarpRowsPerSlice,
        Rule::RegisterFile,
        Rule::SharedMemory,
        Rule::HopperNeedsSm90,
        Rule::PingpongNeedsTwoWarpgroups,
        Rule::ChainedNeedsPersistent,
        Rule::ClusterCombineSplits,
        Rule::ClusterCombineNotChained,
        Rule::WgKeysNeedsTwoWarpgroups,
        Rule::WgKeysStages,
        Rule::WgKeysNotChained,
        Rule::BwdKeysPerWarp,
        Rule::BwdDqRowsPerWarp,
        Rule::HopperBwdBlockM,
        Rule::HopperBwdExp,
        Rule::TmaReduceNeedsHopperBwd,
        Rule::HopperBwdDkvPairs,
        Rule::HopperBwdDkvColumns,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Rule::PRegsNeedsMma => "p_regs_needs_mma",
            Rule::ORegsNeedsKnownLayout => "o_regs_needs_known_layout",
            Rule::SwizzleNeedsAddressedLoads => "swizzle_needs_addressed_loads",
            Rule::WarpRowsPerSlice => "warp_rows_per_slice",
            Rule::RegisterFile => "register_file",
            Rule::SharedMemory => "shared_memory",
            Rule::HopperNeedsSm90 => "hopper_needs_sm90",
            Rule::PingpongNeedsTwoWarpgroups => "pingpong_needs_two_warpgroups",
            Rule::ChainedNeedsPersistent => "chained_needs_persistent",
            Rule::ClusterCombineSplits => "cluster_combine_splits",
            Rule::ClusterCombineNotChained => "cluster_combine_not_chained",
            Rule::WgKeysNeedsTwoWarpgroups => "wg_keys_needs_two_warpgroups",
            Rule::WgKeysStages => "wg_keys_stages",
            Rule::WgKeysNotChained => "wg_keys_not_chained",
            Rule::BwdKeysPerWarp => "bwd_keys_per_warp",
            Rule::BwdDqRowsPerWarp => "bwd_dq_rows_per_warp",
            Rule::HopperBwdBlockM => "hopper_bwd_block_m",
            Rule::HopperBwdExp => "hopper_bwd_exp",
            Rule::TmaReduceNeedsHopperBwd => "tma_reduce_needs_hopper_bwd",
            Rule::HopperBwdDkvPairs => "hopper_bwd_dkv_pairs",
            Rule::HopperBwdDkvColumns => "hopper_bwd_dkv_columns",
        }
    }

    /// Why the rule exists.
    pub fn why(self) -> &'static str {
        match self {
            Rule::PRegsNeedsMma => {
                "P stays in registers only if the C fragment of S is laid out as the A fragment \
                 of P·V; that holds for mma.sync m16n8k16 alone (WMMA layouts are unspecified, \
                 scalar threads own no fragment)"
            }
            Rule::ORegsNeedsKnownLayout => {
                "each O row is rescaled by exp(m - m') per tile; with WMMA the accumulator \
                 fragment's row ownership is unspecified, so a register O cannot be rescaled"
            }
            Rule::SwizzleNeedsAddressedLoads => {
                "wmma::load_matrix_sync reads a tile as pointer + leading dimension; an XOR \
                 swizzled tile is not strided, so WMMA cannot read it"
            }
            Rule::WarpRowsPerSlice => {
                "register-resident mma state (P, or O with mma P·V) is owned by one warp per \
                 16-row slice, so block_m must split into whole slices per warp"
            }
            Rule::RegisterFile => {
                "register-resident accumulators (O, and S/P on the register path) must fit the \
                 255 registers one thread can address; for the Hopper family, the registers a \
                 consumer warpgroup's thread is given, and each wgmma within the launch \
                 bound's registers; for the backward, each kernel's accumulators (dK and dV, \
                 or dQ) with the registers a step needs beside them, and for the Hopper \
                 backward a consumer's dK, dV, Sᵀ, dPᵀ and P within what setmaxnreg gives it"
            }
            Rule::SharedMemory => "the CTA's shared memory must fit the device's per-block limit",
            Rule::HopperNeedsSm90 => {
                "the Hopper families (hopper, hopper_bwd) are built from wgmma, setmaxnreg and \
                 the bulk copies (cp.async.bulk.tensor, cp.reduce.async.bulk), which only \
                 sm_90 (compiled as sm_90a) has"
            }
            Rule::PingpongNeedsTwoWarpgroups => {
                "ping-pong hands the tensor cores from one consumer warpgroup to the next; \
                 with one consumer warpgroup there is nobody to hand them to"
            }
            Rule::ChainedNeedsPersistent => {
                "chained overlap issues the next tile's first Q·Kᵀ with this tile's last P·V; \
                 without a persistent grid a CTA computes one tile and has no next one"
            }
            Rule::ClusterCombineSplits => {
                "cluster_combine runs the splits of one query block as one thread block \
                 cluster: with one split there is nothing to merge, and a cluster the \
                 runtime can launch holds at most 8 CTAs (the portable limit)"
            }
            Rule::ClusterCombineNotChained => {
                "the cluster merge follows a tile's last P·V and waits on the other CTAs of \
                 the cluster; chained overlap folds a tile's epilogue into the next tile's \
                 first steps, and the template's chained stream has no merge written into it"
            }
            Rule::WgKeysNeedsTwoWarpgroups => {
                "wg_split = \"keys\" divides the K/V tiles among the consumer warpgroups; with \
                 one there is nothing to divide (it is the rows kernel)"
            }
            Rule::WgKeysStages => {
                "split by keys, a warpgroup waits only for its own tiles, on a stage's mbarrier \
                 by phase parity, which tells two phases apart: the stage's previous use must \
                 be the same warpgroup's (done with, so that phase has completed), or the wait \
                 could pass on the phase before it; so every stage belongs to one warpgroup"
            }
            Rule::WgKeysNotChained => {
                "the keys split merges the warpgroups' softmax states and O after a tile's \
                 last P·V; chained overlap continues the stream into the next tile's first \
                 steps, and the template's chained stream has no merge written into it"
            }
            Rule::BwdKeysPerWarp => {
                "the backward's main kernel keeps S, dP and the dK, dV accumulators of its \
                 keys in mma.sync C fragments, which cover 16 rows: each warp owns \
                 block_n / warps keys, so that must be whole 16-key slices"
            }
            Rule::BwdDqRowsPerWarp => {
                "the separate dq kernel keeps S, dP and the dQ accumulator of its query rows \
                 in mma.sync C fragments, which cover 16 rows: each warp owns block_m / warps \
                 rows, so that must be whole 16-row slices"
            }
            Rule::HopperBwdBlockM => {
                "the Hopper backward's step of block_m query rows is the N of Sᵀ = K·Qᵀ's \
                 wgmma and is cut into 64-row units for dQ = dS·K, whose wgmma M is 64: \
                 block_m must be whole 64-row units, and 192 never fits the registers"
            }
            Rule::HopperBwdExp => {
                "the Hopper backward template computes P = exp(S - lse) by expf or by one \
                 FFMA and ex2; it has no polynomial path of the kind exp2_fma selects"
            }
            Rule::TmaReduceNeedsHopperBwd => {
                "dq_mode = \"tma_reduce\" adds dQ into the fp32 accumulator with the bulk \
                 reduce-add (cp.reduce.async.bulk), an sm_90 instruction; the ampere_bwd \
                 family is mma.sync code built for sm_80 and sm_89 too, which have no bulk \
                 copies, so it adds dQ with red.global (atomic) or not at all (separate)"
            }
            Rule::HopperBwdDkvPairs => {
                "dkv_split = \"columns\" has two consumer warpgroups share 64 keys, each \
                 computing Sᵀ and dPᵀ for half the step's query rows and holding dK and dV \
                 of half the columns: the warpgroups work in pairs, and one consumer \
                 warpgroup has no partner while a third would be left alone"
            }
            Rule::HopperBwdDkvColumns => {
                "dkv_split = \"columns\" gives each warpgroup of a pair half the stored \
                 columns of dK and dV, the N of its wgmmas, whose B operands (Q, dO) \
                 wgmma's descriptors address in whole 64-column blocks of the 128-byte \
                 swizzle: each half must be whole blocks, so the stored columns a \
                 multiple of 128 (D96 stored as 128, D128, D256); at D64 a half would be \
                 32 columns, half a block, where no descriptor can start"
            }
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One failed rule: which, why, and how to fix the genome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub rule: Rule,
    /// What in this genome breaks the rule, with numbers.
    pub detail: String,
    /// A change that makes the genome valid.
    pub fix: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule `{}` failed: {} ({}); fix: {}",
            self.rule,
            self.detail,
            self.rule.why(),
            self.fix
        )
    }
}

mod backward;
mod hopper_backward;

/// Where the checks report a failed rule: in full ([`violations`]), or only that one
/// failed ([`is_valid`], which the search calls for every candidate it weighs, and which
/// then formats no message).
trait Report {
    fn fail(&mut self, rule: Rule, detail: impl FnOnce() -> String, fix: impl FnOnce() -> String);
}

impl Report for Vec<Violation> {
    fn fail(&mut self, rule: Rule, detail: impl FnOnce() -> String, fix: impl FnOnce() -> String) {
        self.push(Violation {
            rule,
            detail: detail(),
            fix: fix(),
        });
    }
}

/// Counts failed rules without describing them.
#[derive(Default)]
struct Failures(usize);

impl Report for Failures {
    fn fail(&mut self, _: Rule, _: impl FnOnce() -> String, _: impl FnOnce() -> String) {
        self.0 += 1;
    }
}

/// Checks every rule; returns all violations (empty when valid).
pub fn violations(g: &Genome, head_dim: HeadDim, target: Target) -> Vec<Violation> {
    let mut out = Vec::new();
    check(g, head_dim, target, &mut out);
    out
}

/// Every rule, each failure reported to `out`.
fn check(g: &Genome, head_dim: HeadDim, target: Target, out: &mut impl Report) {
    if g.family == Family::AmpereBwd {
        backward::check(g, head_dim, target, out);
        return;
    }
    if g.family == Family::HopperBwd {
        hopper_backward::check(g, head_dim, target, out);
        return;
    }
    if g.family == Family::Hopper {
        if target != Target::Sm90 {
            out.fail(
                Rule::HopperNeedsSm90,
                || format!("family = \"hopper\" on {target}"),
                || "set family = \"ampere\", or target sm_90".into(),
            );
        }
        if g.pingpong == Switch::On && g.consumer_wgs == ConsumerWgs::C1 {
            out.fail(
                Rule::PingpongNeedsTwoWarpgroups,
                || "pingpong = \"on\" with consumer_wgs = 1".into(),
                || "set consumer_wgs = 2 or 3, or pingpong = \"off\"".into(),
            );
        }
        if g.softmax_overlap == Overlap::Chained && g.persistent == Switch::Off {
            out.fail(
                Rule::ChainedNeedsPersistent,
                || "softmax_overlap = \"chained\" with persistent = \"off\"".into(),
                || "set persistent = \"on\", or softmax_overlap = \"on\"".into(),
            );
        }
        if g.cluster_combine == Switch::On && !CLUSTER_SPLITS.contains(&g.split_kv.get()) {
            out.fail(
                Rule::ClusterCombineSplits,
                || format!("cluster_combine = \"on\" with split_kv = {}", g.split_kv),
                || "set split_kv = 2, 4 or 8, or cluster_combine = \"off\"".into(),
            );
        }
        if g.cluster_combine == Switch::On && g.softmax_overlap == Overlap::Chained {
            out.fail(
                Rule::ClusterCombineNotChained,
                || "cluster_combine = \"on\" with softmax_overlap = \"chained\"".into(),
                || "set softmax_overlap = \"on\", or cluster_combine = \"off\"".into(),
            );
        }
        if g.wg_split == WgSplit::Keys {
            if g.consumer_wgs == ConsumerWgs::C1 {
                out.fail(
                    Rule::WgKeysNeedsTwoWarpgroups,
                    || "wg_split = \"keys\" with consumer_wgs = 1".into(),
                    || "set consumer_wgs = 2 or 3, or wg_split = \"rows\"".into(),
                );
            } else if !g.stages.get().is_multiple_of(g.consumer_wgs.get()) {
                out.fail(
                    Rule::WgKeysStages,
                    || {
                        format!(
                            "wg_split = \"keys\" with stages = {} over consumer_wgs = {}",
                            g.stages, g.consumer_wgs
                        )
                    },
                    || {
                        format!(
                            "set stages to a multiple of {} (or consumer_wgs to one that \
                             divides {}), or wg_split = \"rows\"",
                            g.consumer_wgs, g.stages
                        )
                    },
                );
            }
            if g.softmax_overlap == Overlap::Chained {
                out.fail(
                    Rule::WgKeysNotChained,
                    || "wg_split = \"keys\" with softmax_overlap = \"chained\"".into(),
                    || "set softmax_overlap = \"on\", or wg_split = \"rows\"".into(),
                );
            }
        }
        budget_rules(g, head_dim, target, out);
        return;
    }

    if g.p_path == Residence::Regs && (g.qk_math != Math::Mma || g.pv_math != Math::Mma) {
        out.fail(
            Rule::PRegsNeedsMma,
            || {
                format!(
                    "p_path = \"regs\" with qk_math = \"{}\", pv_math = \"{}\"",
                    g.qk_math, g.pv_math
                )
            },
            || "set p_path = \"smem\", or qk_math = pv_math = \"mma\"".into(),
        );
    }

    if g.o_accum == Residence::Regs && g.pv_math == Math::Wmma {
        out.fail(
            Rule::ORegsNeedsKnownLayout,
            || "o_accum = \"regs\" with pv_math = \"wmma\"".into(),
            || "set o_accum = \"smem\", or pv_math = \"mma\" or \"scalar\"".into(),
        );
    }

    if g.smem_layout == SmemLayout::Swizzled && (g.qk_math == Math::Wmma || g.pv_math == Math::Wmma)
    {
        out.fail(
            Rule::SwizzleNeedsAddressedLoads,
            || {
                format!(
                    "smem_layout = \"swizzled\" with qk_math = \"{}\", pv_math = \"{}\"",
                    g.qk_math, g.pv_math
                )
            },
            || "set smem_layout = \"padded\" (also conflict-free for WMMA), or use mma".into(),
        );
    }

    let register_mma =
        g.p_path == Residence::Regs || (g.o_accum == Residence::Regs && g.pv_math == Math::Mma);
    let slice_rows = 16 * g.warps.get();
    if register_mma && !g.block_m.get().is_multiple_of(slice_rows) {
        out.fail(
            Rule::WarpRowsPerSlice,
            || {
                format!(
                    "block_m = {} is not a multiple of 16 x warps = {}",
                    g.block_m, slice_rows
                )
            },
            || {
                format!(
                    "raise block_m to a multiple of {slice_rows}, or lower warps to at most {}",
                    (g.block_m.get() / 16).max(1)
                )
            },
        );
    }

    budget_rules(g, head_dim, target, out);
}

/// The device budgets, common to both families: registers and shared memory.
fn budget_rules(g: &Genome, head_dim: HeadDim, target: Target, out: &mut impl Report) {
    let regs = register_accumulators(g, head_dim);
    if g.family == Family::Hopper {
        // wgmma's accumulators stay in registers while the instruction runs: ptxas cannot
        // spill them, and fails to compile a consumer whose O, S and P exceed its share.
        let budget = hopper_consumer_registers(g);
        if regs > budget {
            out.fail(
                Rule::RegisterFile,
                || {
                    format!(
                        "{regs} accumulator registers per consumer thread (O {} + S {} + P {} at \
                     D = {head_dim}, block_n = {}) exceed the {budget} a consumer of {} \
                     warpgroups has with producer_regs = {}",
                        hopper_stored_columns(head_dim) / 2,
                        g.block_n.get() / 2,
                        g.block_n.get() / 4,
                        g.block_n,
                        g.consumer_wgs,
                        g.allele_label(crate::genes::Gene::ProducerRegs)
                    )
                },
                || {
                    "set producer_regs (setmaxnreg gives the consumers the producer's \
                      registers), or lower block_n or consumer_wgs"
                        .into()
                },
            );
        }
        let pv = hopper_stored_columns(head_dim) / 2 + HOPPER_PV_OPERAND_REGS;
        let launch = hopper_launch_registers(g);
        if pv > launch {
            out.fail(
                Rule::RegisterFile,
                || {
                    format!(
                        "the O += P·V wgmma at D = {head_dim} needs {pv} registers per thread \
                     (O {} + {HOPPER_PV_OPERAND_REGS} for its operands), over the {launch} \
                     that the launch bound of {} consumer warpgroups gives every thread; \
                     ptxas checks each wgmma against the launch bound, whatever setmaxnreg \
                     gives later",
                        hopper_stored_columns(head_dim) / 2,
                        g.consumer_wgs
                    )
                },
                || {
                    "lower consumer_wgs (two consumer warpgroups launch with 168 registers \
                      a thread)"
                        .into()
                },
            );
        }
    } else if regs > target.regs_per_thread() {
        out.fail(
            Rule::RegisterFile,
            || {
                format!(
                "{regs} accumulator floats per thread (block_m = {}, block_n = {}, warps = {}, \
                 D = {head_dim}) exceed {} registers",
                g.block_m,
                g.block_n,
                g.warps,
                target.regs_per_thread()
            )
            },
            || "raise warps, lower block_m / block_n, or keep O (o_accum) in \"smem\"".into(),
        );
    }

    let smem = SmemPlan::new(g, head_dim);
    if smem.total() > target.smem_per_block() {
        out.fail(
Rule::SharedMemory,
|| format!(
                "{} bytes of shared memory (Q {} + K/V {} + S/P {} + stats {} + O {}{}{}) at D = {head_dim} \
                 exceed {} bytes on {target}",
                smem.total(),
                smem.q,
                smem.kv,
                smem.s_p,
                smem.stats,
                smem.o,
                if smem.exchange > 0 {
                    format!(" + cluster exchange {}", smem.exchange)
                } else {
                    String::new()
                },
                if smem.keys > 0 {
                    format!(" + warpgroup merge {}", smem.keys)
                } else {
                    String::new()
                },
                target.smem_per_block()
            ),
|| if g.family == Family::Hopper {
                format!(
                    "lower stages, block_n or consumer_wgs, or set {}persistent = \"off\" \
                     (or cluster_combine = \"off\"){}",
                    // Only where the direct store would free the buffer (not chained).
                    if hopper_second_q_buffer(g)
                        && !hopper_second_q_buffer(&Genome {
                            o_store: OStore::Direct,
                            ..*g
                        })
                    {
                        "o_store = \"direct\" or "
                    } else {
                        ""
                    },
                    if smem.keys > 0 {
                        ", or wg_split = \"rows\" (no merge area)"
                    } else {
                        ""
                    }
                )
            } else {
                "lower stages, block_n or block_m, or move P (p_path) / O (o_accum) to \"regs\""
                    .into()
            },
);
    }
}

/// True when no rule fails.
pub fn is_valid(g: &Genome, head_dim: HeadDim, target: Target) -> bool {
    let mut failures = Failures::default();
    check(g, head_dim, target, &mut failures);
    failures.0 == 0
}
