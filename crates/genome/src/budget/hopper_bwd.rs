//! The Hopper backward template's budgets (`kernels/attention_bwd_sm90.cu`; its plan is
//! `kernels/ABI.md`, "The Hopper backward template"): the two kernels' shared memory,
//! which the template `static_assert`s against `EVO_SMEM_BYTES` and `EVO_DQ_SMEM_BYTES`,
//! and the registers a consumer thread of the main kernel holds at its peak.
//!
//! `dkv_split` decides how the consumer warpgroups share the keys: `keys`, each owns 64
//! and their dK and dV over every stored column; `columns`, a pair owns 64, each
//! warpgroup computes Sᵀ and dPᵀ for half the step's query rows, leaves Pᵀ and dSᵀ in
//! shared memory, and holds dK and dV of half the columns.

use super::{hopper_stored_columns, SmemPlan, HOPPER_ALIGN_SLACK, HOPPER_BARRIERS};
use crate::genes::{DkvSplit, DqMode, Family, Genome};
use crate::problem::HeadDim;

/// Warpgroups per 64 keys: 1 (`dkv_split = "keys"`), 2 (`"columns"`, each holding half
/// the columns of dK and dV). The template's `kSplit`.
pub fn hopper_bwd_split(g: &Genome) -> u32 {
    match g.dkv_split {
        DkvSplit::Keys => 1,
        DkvSplit::Columns => 2,
    }
}

/// Keys of the main kernel's CTA: 64 per consumer warpgroup (each owns the dK and dV
/// of its 64 keys, the M of its wgmmas), or 64 per pair of them with `dkv_split =
/// "columns"`. The template's `EVO_BLOCK_N`.
pub fn hopper_bwd_block_n(g: &Genome) -> u32 {
    64 * g.consumer_wgs.get() / hopper_bwd_split(g)
}

/// The bytes of one dQ unit (`tma_reduce`): 64 query rows x 64 columns of fp32, staged
/// whole by a consumer warpgroup and added into the accumulator by one bulk reduce-add.
pub const HOPPER_BWD_DQ_UNIT_BYTES: u32 = 64 * 64 * 4;

/// `tma_reduce`: the dQ units a consumer warpgroup stages per query block (the template's
/// `kDqSlots`): the block's `BM/64 x ceil(D/64)` units dealt round robin.
pub fn hopper_bwd_dq_slots(g: &Genome, head_dim: HeadDim) -> u32 {
    let units = g.block_m.get() / 64 * hopper_stored_columns(head_dim) / 64;
    units.div_ceil(g.consumer_wgs.get())
}

impl SmemPlan {
    /// `hopper_bwd`, the main kernel (`EVO_SMEM_BYTES`): `kv` the CTA's K and V,
    /// resident; `q` a ring of `stages` Q and dO tiles; `s_p` dS transposed in two
    /// buffers (the A operand of dQ = dS·K; none with the separate dq kernel), and with
    /// `dkv_split = "columns"` two of Pᵀ besides (dV and dK of a pair read the whole
    /// step's Pᵀ and dSᵀ from shared memory, so dSᵀ is there whatever `dq_mode`); `o`
    /// each consumer warpgroup's dQ staging of `tma_reduce`; `stats` lse and dpsum per
    /// ring slot, the mbarriers and the 1024 bytes of the swizzle's alignment. Tiles are
    /// stored in whole 64-column blocks (D96 as 128).
    pub fn hopper_bwd_main(g: &Genome, head_dim: HeadDim) -> SmemPlan {
        let ds = hopper_stored_columns(head_dim);
        let (bm, bn, st) = (g.block_m.get(), hopper_bwd_block_n(g), g.stages.get());
        let separate = g.dq_mode == DqMode::Separate;
        let buffer = bm * bn * 2;
        SmemPlan {
            q: st * 2 * bm * ds * 2,
            kv: 2 * bn * ds * 2,
            s_p: match g.dkv_split {
                DkvSplit::Columns => 4 * buffer,
                DkvSplit::Keys if separate => 0,
                DkvSplit::Keys => 2 * buffer,
            },
            stats: st * 2 * bm * 4 + HOPPER_BARRIERS + HOPPER_ALIGN_SLACK,
            o: if g.dq_mode == DqMode::TmaReduce {
                g.consumer_wgs.get() * hopper_bwd_dq_slots(g, head_dim) * HOPPER_BWD_DQ_UNIT_BYTES
            } else {
                0
            },
            exchange: 0,
            keys: 0,
        }
    }

    /// `hopper_bwd`, the dq kernel of `dq_mode = "separate"` (`EVO_DQ_SMEM_BYTES`; all
    /// zero otherwise, when none is launched): the CTA's Q and dO rows (64 per consumer
    /// warpgroup) resident, a ring of `stages` K and V tiles of 64 keys, the rows' lse
    /// and dpsum, the mbarriers and the alignment.
    pub fn hopper_bwd_dq(g: &Genome, head_dim: HeadDim) -> SmemPlan {
        let mut plan = SmemPlan::default();
        if g.family != Family::HopperBwd || g.dq_mode != DqMode::Separate {
            return plan;
        }
        let ds = hopper_stored_columns(head_dim);
        let rows = 64 * g.consumer_wgs.get();
        plan.q = 2 * rows * ds * 2;
        plan.kv = g.stages.get() * 2 * 64 * ds * 2;
        plan.stats = 2 * rows * 4 + HOPPER_BARRIERS + HOPPER_ALIGN_SLACK;
        plan
    }
}

/// `hopper_bwd`: registers a consumer thread of the main kernel holds at its peak, as
/// the template's `hopper_bwd_regs` assert counts them: dK and dV (m64nDs wgmma
/// accumulators, Ds/2 floats each), Sᵀ and dPᵀ (m64nBM, BM/2 each), P's 16-bit
/// fragments (BM/4) and [`HOPPER_BWD_ADDRESS_REGS`] of addressing. With `dkv_split =
/// "columns"` a warpgroup holds half of each: dK and dV over Ds/2 columns, Sᵀ and dPᵀ
/// over BM/2 query rows.
pub fn hopper_bwd_consumer_needs(g: &Genome, head_dim: HeadDim) -> u32 {
    let (bm, s) = (g.block_m.get(), hopper_bwd_split(g));
    hopper_stored_columns(head_dim) / s + bm / s + bm / 4 / s + HOPPER_BWD_ADDRESS_REGS
}

/// `hopper_bwd`: the registers beside the accumulators that the template's register
/// assert counts (descriptors, addresses, loop state).
pub const HOPPER_BWD_ADDRESS_REGS: u32 = 8;
