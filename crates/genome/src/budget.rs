//! What a genome costs on the device: the CTA's shared-memory plan (which the template
//! `static_assert`s against) and the registers its accumulators and wgmma need. The
//! rules (`crate::rules`) compare these with the device's limits.

use crate::genes::{
    DqMode, Family, Genome, Math, OStore, Overlap, Residence, SmemLayout, Switch, WgSplit,
};
use crate::problem::HeadDim;
use serde::{Deserialize, Serialize};

mod hopper_bwd;
pub use hopper_bwd::*;

/// Byte sizes of the CTA's shared-memory regions, in the order the template lays them out.
///
/// The kernel template computes the same layout from its macros and
/// `static_assert`s that the total equals [`SmemPlan::total`], which the host
/// passes as `EVO_SMEM_BYTES`: host and template cannot drift apart silently.
/// For the Hopper family `stats` holds the mbarriers (256 bytes) and the 1024 bytes
/// by which the dynamic base is aligned up for the 128-byte swizzle. For the backward
/// family it is the main kernel's plan (`q`: the Q and dO ring, `kv`: the CTA's K and V,
/// `s_p`: dS transposed, `stats`: lse and dpsum per ring slot); the dq kernel has a plan
/// of its own ([`SmemPlan::bwd_dq`]). The Hopper backward's plans are in
/// `budget/hopper_bwd.rs` ([`SmemPlan::hopper_bwd_main`], [`SmemPlan::hopper_bwd_dq`]).
/// `SmemPlan::default()` is the plan of a kernel that is not launched: all zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmemPlan {
    pub q: u32,
    pub kv: u32,
    pub s_p: u32,
    pub stats: u32,
    pub o: u32,
    /// Hopper `cluster_combine`: where the other splits' partial O and softmax
    /// statistics arrive ([`cluster_exchange_bytes`]).
    pub exchange: u32,
    /// Hopper `wg_split = "keys"`: where warpgroups 1.. leave their O and softmax
    /// statistics for warpgroup 0 ([`keys_merge_bytes`]).
    #[serde(default)]
    pub keys: u32,
}

impl SmemPlan {
    pub fn new(g: &Genome, head_dim: HeadDim) -> SmemPlan {
        let d = head_dim.get();
        if g.family == Family::AmpereBwd {
            return SmemPlan::bwd_main(g, head_dim);
        }
        if g.family == Family::HopperBwd {
            return SmemPlan::hopper_bwd_main(g, head_dim);
        }
        if g.family == Family::Hopper {
            // Tiles are stored in whole 64-column blocks (D96 as 128 columns).
            let ds = hopper_stored_columns(head_dim);
            let tile = g.block_n.get() * ds * 2;
            let q = g.rows_per_cta() * ds * 2;
            return SmemPlan {
                q,
                kv: g.stages.get() * 2 * tile,
                s_p: 0,
                stats: HOPPER_ALIGN_SLACK + HOPPER_BARRIERS,
                // A persistent CTA holds a second Q-sized buffer: O staged apart from Q,
                // so the next tile's Q can land while this tile's O is stored, or with
                // chained overlap the next tile's Q (O then reuses the finished tile's Q
                // slot). Otherwise O reuses Q's rows, or is not staged (`o_store`).
                o: if hopper_second_q_buffer(g) { q } else { 0 },
                exchange: cluster_exchange_bytes(g, head_dim),
                keys: keys_merge_bytes(g, head_dim),
            };
        }
        let bm = g.block_m.get();
        let bn = g.block_n.get();
        let pitch = d + if g.smem_layout == SmemLayout::Padded {
            8
        } else {
            0
        };
        let q = bm * pitch * 2;
        let kv = g.stages.get() * 2 * bn * pitch * 2;
        let s_p = match g.p_path {
            Residence::Regs => 0,
            Residence::Smem => bm * (bn + 4) * 4 + bm * (bn + 8) * 2,
        };
        let stats = 3 * bm * 4;
        let o = match g.o_accum {
            Residence::Regs => 0,
            Residence::Smem => bm * (d + 4) * 4,
        };
        SmemPlan {
            q,
            kv,
            s_p,
            stats,
            o,
            exchange: 0,
            keys: 0,
        }
    }

    pub fn total(&self) -> u32 {
        self.q + self.kv + self.s_p + self.stats + self.o + self.exchange + self.keys
    }

    /// Backward, the main kernel (the template's `EVO_SMEM_BYTES`): K and V of the CTA's
    /// keys, resident; a ring of `stages` Q and dO tiles with their rows' lse and dpsum;
    /// dS transposed (16 bits, rows padded by 8), the A operand of dQ += dS·K.
    pub fn bwd_main(g: &Genome, head_dim: HeadDim) -> SmemPlan {
        let (bm, bn) = (g.block_m.get(), g.block_n.get());
        let pitch = bwd_pitch(g, head_dim);
        SmemPlan {
            q: g.stages.get() * 2 * bm * pitch * 2,
            kv: 2 * bn * pitch * 2,
            s_p: bn * (bm + 8) * 2,
            stats: g.stages.get() * 2 * bm * 4,
            o: 0,
            exchange: 0,
            keys: 0,
        }
    }

    /// Backward, the dq kernel of `dq_mode = "separate"` (the template's
    /// `EVO_DQ_SMEM_BYTES`; all zero with `atomic`, which launches none): the CTA's Q and
    /// dO rows with their lse and dpsum, resident; a ring of `stages` K and V tiles.
    pub fn bwd_dq(g: &Genome, head_dim: HeadDim) -> SmemPlan {
        if g.family != Family::AmpereBwd || g.dq_mode != DqMode::Separate {
            return SmemPlan::default();
        }
        let (bm, bn) = (g.block_m.get(), g.block_n.get());
        let pitch = bwd_pitch(g, head_dim);
        SmemPlan {
            q: 2 * bm * pitch * 2,
            kv: g.stages.get() * 2 * bn * pitch * 2,
            stats: 2 * bm * 4,
            ..SmemPlan::default()
        }
    }
}

/// Backward: 16-bit elements per shared-memory row of a Q, dO, K or V tile (padded
/// layout: 8 more, so ldmatrix rows fall into different banks).
fn bwd_pitch(g: &Genome, head_dim: HeadDim) -> u32 {
    head_dim.get()
        + if g.smem_layout == SmemLayout::Padded {
            8
        } else {
            0
        }
}

/// Backward: registers per thread beside the fp32 accumulators that stay in registers
/// for a whole loop (dK and dV in the main kernel, dQ in the dq kernel): the S, dP and
/// dS fragments of a step, addresses and loop state.
pub const BWD_REGISTER_HEADROOM: u32 = 40;

/// Backward, the main kernel: fp32 dK and dV accumulators per thread. The CTA's
/// 2 x block_n x D floats, spread over its warps' threads (warp w owns keys
/// [w x block_n / warps, ...), a thread 1/32 of its warp's m16n8 C fragments).
pub fn bwd_main_accumulators(g: &Genome, head_dim: HeadDim) -> u32 {
    (2 * g.block_n.get() * head_dim.get()).div_ceil(32 * g.warps.get())
}

/// Backward, the dq kernel (`dq_mode = "separate"`, else 0): fp32 dQ accumulators per
/// thread, block_m x D over the CTA's threads.
pub fn bwd_dq_accumulators(g: &Genome, head_dim: HeadDim) -> u32 {
    if g.dq_mode != DqMode::Separate {
        return 0;
    }
    (g.block_m.get() * head_dim.get()).div_ceil(32 * g.warps.get())
}

/// Hopper: whether a persistent CTA holds a second Q-sized buffer, for O's staging or,
/// chained, for the next tile's Q (the template's `kOBytes`).
pub fn hopper_second_q_buffer(g: &Genome) -> bool {
    g.persistent == Switch::On
        && (g.o_store != OStore::Direct || g.softmax_overlap == Overlap::Chained)
}

/// Hopper `cluster_combine`: the splits a cluster can merge (with one there is nothing
/// to merge; 8 CTAs is the portable cluster limit).
pub const CLUSTER_SPLITS: std::ops::RangeInclusive<u32> = 2..=8;

/// Hopper `cluster_combine` (the template's `kernels/cluster.cuh`): each CTA of a
/// cluster of S = `split_kv` finalises a slice of ceil(D/8 / S) 8-column groups of O,
/// and receives from each of the S - 1 other CTAs, per consumer thread, a 16-byte
/// float4 per group of its slice plus one of softmax statistics (m, l of two rows).
/// A persistent CTA, which merges once per tile, has two such exchanges it alternates.
pub fn cluster_exchange_bytes(g: &Genome, head_dim: HeadDim) -> u32 {
    let s = g.split_kv.get();
    // Off, or a split no cluster holds (rule `cluster_combine_splits` says so): none.
    if g.family != Family::Hopper
        || g.cluster_combine == Switch::Off
        || !CLUSTER_SPLITS.contains(&s)
    {
        return 0;
    }
    let groups = (head_dim.get() / 8).div_ceil(s);
    let exchanges = if g.persistent == Switch::On { 2 } else { 1 };
    exchanges * g.consumer_wgs.get() * (s - 1) * (groups + 1) * 16 * 128
}

/// Hopper `wg_split = "keys"` (the template's `kKeysBytes`): each consumer warpgroup but
/// the first leaves, per thread, its O accumulators (the stored columns / 2) and the m
/// and l of its two rows, 4 bytes each.
pub fn keys_merge_bytes(g: &Genome, head_dim: HeadDim) -> u32 {
    if g.family != Family::Hopper || g.wg_split != WgSplit::Keys {
        return 0;
    }
    (g.consumer_wgs.get().saturating_sub(1)) * (hopper_stored_columns(head_dim) / 2 + 4) * 128 * 4
}

/// Hopper: bytes by which the template aligns the dynamic shared-memory base up
/// (the 128-byte swizzle repeats every 1024 bytes), and the mbarriers' bytes.
pub const HOPPER_ALIGN_SLACK: u32 = 1024;
pub const HOPPER_BARRIERS: u32 = 256;

/// Hopper: the columns of a Q, K, V or O tile in shared memory, and the N of O += P·V's
/// wgmma: D rounded up to the 64-column blocks of the 128-byte swizzle (96 -> 128; the
/// template's `kDs`). An MN-major 128-byte-swizzle operand (V) is read in whole
/// 64-column atoms, so D96's O accumulator is 128 columns wide, the last 32 unused.
pub fn hopper_stored_columns(head_dim: HeadDim) -> u32 {
    head_dim.get().div_ceil(64) * 64
}

/// Floats per thread that the genome requires to live in registers (backward: in the
/// more demanding of its two kernels).
pub fn register_accumulators(g: &Genome, head_dim: HeadDim) -> u32 {
    let d = head_dim.get();
    if g.family == Family::AmpereBwd {
        return bwd_main_accumulators(g, head_dim).max(bwd_dq_accumulators(g, head_dim));
    }
    if g.family == Family::HopperBwd {
        return hopper_bwd_consumer_needs(g, head_dim);
    }
    if g.family == Family::Hopper {
        // One m64nN wgmma accumulator is N/2 floats per thread: O (N = D) and S (N = BN);
        // P, S converted to 16 bits, is BN/4 registers, live next to them. Counted with
        // or without the softmax overlap: ptxas gives P registers of its own either way
        // (D128, three consumer warpgroups, no overlap, no setmaxnreg: 128 registers
        // without P, 160 with it, 128 to be had; ptxas failed to compile it in
        // experiments/2026-11-24-h100-champions-2). O is as wide as P·V's N (D96: 128).
        return hopper_stored_columns(head_dim) / 2 + g.block_n.get() / 2 + g.block_n.get() / 4;
    }
    let bm = g.block_m.get();
    let bn = g.block_n.get();
    let warps = g.warps.get();
    // m16 slices per warp, rounded up: a warp that owns a partial slice still holds whole fragments.
    let slices = bm.div_ceil(16 * warps).max(1);
    let o = match (g.o_accum, g.pv_math) {
        (Residence::Smem, _) => 0,
        // m16n8 C fragments: 4 floats per lane per 8 columns of D.
        (Residence::Regs, Math::Mma) => slices * (d / 8) * 4,
        // scalar: the CTA's O tile spread evenly over the compute threads.
        (Residence::Regs, _) => (bm * d).div_ceil(warps * 32),
    };
    let s = match g.p_path {
        Residence::Smem => 0,
        Residence::Regs => slices * (bn / 8) * 4,
    };
    o + s
}

/// Registers one consumer thread of a Hopper genome may hold: with `producer_regs` set,
/// what setmaxnreg gives the consumers (the CTA's launch allocation, less the producer's
/// share, split over the consumer warpgroups, rounded down to 8, at most 240: asking
/// for more than the producer frees makes `setmaxnreg.inc` wait forever); without it,
/// the launch bound's share of the register file.
pub fn hopper_consumer_registers(g: &Genome) -> u32 {
    let wgs = g.consumer_wgs.get();
    match g.producer_regs.get() {
        0 => hopper_launch_registers(g),
        // Registers move only within the CTA's launch allocation (each thread's launch
        // share, rounded down to 8): the consumers get what the producer frees.
        p => (((65536 / (128 * (wgs + 1)) / 8 * 8) * (wgs + 1) - p) / wgs / 8 * 8).min(240),
    }
}

/// Hopper: registers per thread that the launch bound gives every thread of the CTA
/// (`__launch_bounds__(128 x (consumer_wgs + 1), 1)`: the register file's share, rounded
/// down to 8): 168 with two consumer warpgroups, 128 with three.
pub fn hopper_launch_registers(g: &Genome) -> u32 {
    (65536 / (128 * (g.consumer_wgs.get() + 1)) / 8 * 8).min(255)
}

/// Hopper: registers ptxas needs beside O's accumulators to compile one O += P·V wgmma
/// (its A fragment, descriptor, predicate and what stays live across it). ptxas checks
/// that instruction against the launch bound's registers, not against what setmaxnreg
/// gives the consumers later: at D256 it asks for 158 (128 + 30) whatever block_n,
/// loader, overlap or ping-pong (NVRTC 13.5, sm_90a), and fails to compile a kernel of
/// three consumer warpgroups (128) with "Insufficient registers".
pub const HOPPER_PV_OPERAND_REGS: u32 = 30;
