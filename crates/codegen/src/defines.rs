//! Genome -> `-D` macro definitions: the only contract between Rust and the template.
//!
//! The template (`kernels/attention.cu`) reads nothing but these integer macros,
//! so a CUDA engineer can compile it by hand with the same list (`evo compile
//! --emit defines` prints it). The order is fixed (the order of the genes, then
//! the derived sizes, then the forward's build, `EVO_LSE`) so that option lists, logs
//! and snapshots are stable.

use evo_genome::{
    rules::hopper_bwd_block_n, DkvSplit, DqMode, Dtype, ExpFn, Family, Genome, HeadDim, HopperLoad,
    KvLoad, Math, OStore, Overlap, Residence, SmemLayout, SmemPlan, Switch, WgSplit,
};
use std::fmt;

/// Macro definitions in the order they are passed to NVRTC.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Defines(pub Vec<(String, String)>);

impl Defines {
    /// The NVRTC flags, `-DNAME=VALUE`, one per definition.
    pub fn flags(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(name, value)| format!("-D{name}={value}"))
            .collect()
    }

    /// The value of one macro, if defined.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One `-DNAME=VALUE` per line, ready to paste after `nvcc`.
impl fmt::Display for Defines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for flag in self.flags() {
            writeln!(f, "{flag}")?;
        }
        Ok(())
    }
}

fn math(m: Math) -> u32 {
    match m {
        Math::Scalar => 0,
        Math::Wmma => 1,
        Math::Mma => 2,
    }
}

fn layout(l: SmemLayout) -> u32 {
    match l {
        SmemLayout::Plain => 0,
        SmemLayout::Padded => 1,
        SmemLayout::Swizzled => 2,
    }
}

/// The macro that makes a forward template's lse twin (kernels/ABI.md, "The log-sum-exp
/// output"): [`defines`] always sets it to 0 for a forward genome, the twin to 1.
pub const LSE_MACRO: &str = "EVO_LSE";

/// Which kernels of a forward genome a build makes: the plain ones (what search, FAST,
/// bench and inference compile) or the lse twin, the same kernels with the `lse`
/// argument and its stores, which the backward's forward needs. A compile-time choice
/// because compiled in and not asked for the lse cost 1-2% on 8 of the 13 H100
/// champions (kernels/NOTES.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Build {
    #[default]
    Plain,
    LseTwin,
}

/// [`defines`] for one build: the lse twin is the same list with `EVO_LSE` = 1; `None`
/// for the twin of a genome without one (a backward genome, which has no lse output).
pub fn build_defines(
    genome: &Genome,
    head_dim: HeadDim,
    dtype: Dtype,
    build: Build,
) -> Option<Defines> {
    let mut list = defines(genome, head_dim, dtype);
    if build == Build::LseTwin {
        let lse = list.0.iter_mut().find(|(name, _)| name == LSE_MACRO)?;
        lse.1 = "1".into();
    }
    Some(list)
}

/// The macro definitions that instantiate the template for one genome: the plain build
/// (`EVO_LSE` = 0 for the forward families; [`build_defines`] makes the lse twin).
///
/// `reg_cap` is `EVO_MAX_REGS` (0 = no cap): the template declares the kernel
/// `__maxnreg__(cap)` instead of `__launch_bounds__`, because ptxas lets the launch
/// bounds override `--maxrregcount` and NVRTC rejects both attributes on one kernel.
/// `EVO_SMEM_BYTES` is the genome crate's [`evo_genome::SmemPlan`] total; the
/// template `static_assert`s that its own layout adds up to the same number.
pub fn defines(genome: &Genome, head_dim: HeadDim, dtype: Dtype) -> Defines {
    let g = genome;
    let flag = |b: bool| u32::from(b);
    if g.family == Family::Hopper {
        return hopper_defines(g, head_dim, dtype);
    }
    if g.family == Family::AmpereBwd {
        return bwd_defines(g, head_dim, dtype);
    }
    if g.family == Family::HopperBwd {
        return hopper_bwd_defines(g, head_dim, dtype);
    }
    let list: [(&str, u32); 22] = [
        ("EVO_HEAD_DIM", head_dim.get()),
        ("EVO_BF16", flag(dtype == Dtype::Bf16)),
        ("EVO_QK_MATH", math(g.qk_math)),
        ("EVO_PV_MATH", math(g.pv_math)),
        ("EVO_P_REGS", flag(g.p_path == Residence::Regs)),
        ("EVO_O_REGS", flag(g.o_accum == Residence::Regs)),
        ("EVO_BLOCK_M", g.block_m.get()),
        ("EVO_BLOCK_N", g.block_n.get()),
        ("EVO_WARPS", g.warps.get()),
        ("EVO_PRODUCER_WARPS", g.producer_warps.get()),
        ("EVO_CP_ASYNC", flag(g.kv_load == KvLoad::CpAsync)),
        ("EVO_STAGES", g.stages.get()),
        ("EVO_SMEM_LAYOUT", layout(g.smem_layout)),
        ("EVO_VEC_BYTES", g.vec_bytes.get()),
        ("EVO_EXP2", flag(g.exp != ExpFn::Exp)),
        ("EVO_EXP_FMA", flag(g.exp == ExpFn::Exp2Fma)),
        ("EVO_SPLIT_KV", g.split_kv.get()),
        ("EVO_MIN_BLOCKS", g.min_blocks.get()),
        ("EVO_MAX_REGS", g.reg_cap.get()),
        ("EVO_PACK_GQA", flag(g.pack_gqa == Switch::On)),
        ("EVO_SMEM_BYTES", g.smem(head_dim).total()),
        (LSE_MACRO, 0),
    ];
    Defines(
        list.iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
    )
}

/// The macros of the Hopper template (`kernels/attention_sm90.cu`): only the genes
/// that apply to the family.
fn hopper_defines(g: &Genome, head_dim: HeadDim, dtype: Dtype) -> Defines {
    let load = match g.hopper_load {
        HopperLoad::Direct => 0,
        HopperLoad::CpAsync => 1,
        HopperLoad::Tma => 2,
    };
    let overlap = match g.softmax_overlap {
        Overlap::Off => 0,
        Overlap::On => 1,
        Overlap::Chained => 2,
    };
    let list: [(&str, u32); 20] = [
        ("EVO_HEAD_DIM", head_dim.get()),
        ("EVO_BF16", u32::from(dtype == Dtype::Bf16)),
        ("EVO_BLOCK_N", g.block_n.get()),
        ("EVO_CONSUMER_WGS", g.consumer_wgs.get()),
        ("EVO_STAGES", g.stages.get()),
        ("EVO_KV_LOAD", load),
        ("EVO_EXP2", u32::from(g.exp != ExpFn::Exp)),
        ("EVO_EXP_FMA", u32::from(g.exp == ExpFn::Exp2Fma)),
        ("EVO_SPLIT_KV", g.split_kv.get()),
        ("EVO_PRODUCER_REGS", g.producer_regs.get()),
        ("EVO_PINGPONG", u32::from(g.pingpong == Switch::On)),
        ("EVO_OVERLAP", overlap),
        ("EVO_PERSISTENT", u32::from(g.persistent == Switch::On)),
        ("EVO_PACK_GQA", u32::from(g.pack_gqa == Switch::On)),
        (
            "EVO_CLUSTER_COMBINE",
            u32::from(g.cluster_combine == Switch::On),
        ),
        ("EVO_O_DIRECT", u32::from(g.o_store == OStore::Direct)),
        ("EVO_O_TMA", u32::from(g.o_store == OStore::Tma)),
        ("EVO_WG_KEYS", u32::from(g.wg_split == WgSplit::Keys)),
        ("EVO_SMEM_BYTES", g.smem(head_dim).total()),
        (LSE_MACRO, 0),
    ];
    Defines(
        list.iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
    )
}

/// The macros of the backward template (`kernels/attention_bwd.cu`): only the genes that
/// apply to the family, then the two kernels' shared-memory plans, which the template
/// `static_assert`s (`EVO_DQ_SMEM_BYTES` is 0 without a dq kernel). `EVO_EXP2` is 0
/// (`expf`), 1 (`exp2f`, the scale and lse folded into one FFMA) or 2 (as 1, every
/// other exponential by the polynomial): the forward's two flags in one.
fn bwd_defines(g: &Genome, head_dim: HeadDim, dtype: Dtype) -> Defines {
    let exp = match g.exp {
        ExpFn::Exp => 0,
        ExpFn::Exp2 => 1,
        ExpFn::Exp2Fma => 2,
    };
    let list: [(&str, u32); 15] = [
        ("EVO_HEAD_DIM", head_dim.get()),
        ("EVO_BF16", u32::from(dtype == Dtype::Bf16)),
        ("EVO_BLOCK_M", g.block_m.get()),
        ("EVO_BLOCK_N", g.block_n.get()),
        ("EVO_WARPS", g.warps.get()),
        ("EVO_CP_ASYNC", u32::from(g.kv_load == KvLoad::CpAsync)),
        ("EVO_STAGES", g.stages.get()),
        ("EVO_SMEM_LAYOUT", layout(g.smem_layout)),
        ("EVO_VEC_BYTES", g.vec_bytes.get()),
        ("EVO_EXP2", exp),
        ("EVO_MIN_BLOCKS", g.min_blocks.get()),
        ("EVO_MAX_REGS", g.reg_cap.get()),
        ("EVO_DQ_SEPARATE", u32::from(g.dq_mode == DqMode::Separate)),
        ("EVO_SMEM_BYTES", SmemPlan::bwd_main(g, head_dim).total()),
        ("EVO_DQ_SMEM_BYTES", SmemPlan::bwd_dq(g, head_dim).total()),
    ];
    Defines(
        list.iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
    )
}

/// The macros of the Hopper backward template (`kernels/attention_bwd_sm90.cu`; kernels/
/// ABI.md, "The Hopper backward template"), every one always defined: `EVO_BLOCK_N` is 64
/// per consumer warpgroup, or per pair of them with `dkv_split = "columns"`
/// (`EVO_DKV_COLUMNS = 1`: each warpgroup of a pair holds dK and dV of half the
/// columns; the template asserts `EVO_BLOCK_N == 64 * EVO_CONSUMER_WGS / (1 +
/// EVO_DKV_COLUMNS)`); `dq_mode` is two flags (`EVO_DQ_SEPARATE`, and `EVO_DQ_BULK`
/// for `tma_reduce`'s bulk reduce-adds); the two kernels' plans, which the template
/// `static_assert`s. `exp2_fma` writes `EVO_EXP2 = 2`, which the template refuses as the
/// rule `hopper_bwd_exp` does first. The template's measurement switch `EVO_BENCH_SKIP`
/// (wrong results) is never set.
fn hopper_bwd_defines(g: &Genome, head_dim: HeadDim, dtype: Dtype) -> Defines {
    let exp = match g.exp {
        ExpFn::Exp => 0,
        ExpFn::Exp2 => 1,
        ExpFn::Exp2Fma => 2,
    };
    let list: [(&str, u32); 13] = [
        ("EVO_HEAD_DIM", head_dim.get()),
        ("EVO_BF16", u32::from(dtype == Dtype::Bf16)),
        ("EVO_BLOCK_N", hopper_bwd_block_n(g)),
        ("EVO_BLOCK_M", g.block_m.get()),
        ("EVO_CONSUMER_WGS", g.consumer_wgs.get()),
        ("EVO_STAGES", g.stages.get()),
        ("EVO_EXP2", exp),
        ("EVO_DQ_SEPARATE", u32::from(g.dq_mode == DqMode::Separate)),
        ("EVO_DQ_BULK", u32::from(g.dq_mode == DqMode::TmaReduce)),
        ("EVO_PRODUCER_REGS", g.producer_regs.get()),
        (
            "EVO_DKV_COLUMNS",
            u32::from(g.dkv_split == DkvSplit::Columns),
        ),
        (
            "EVO_SMEM_BYTES",
            SmemPlan::hopper_bwd_main(g, head_dim).total(),
        ),
        (
            "EVO_DQ_SMEM_BYTES",
            SmemPlan::hopper_bwd_dq(g, head_dim).total(),
        ),
    ];
    Defines(
        list.iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
    )
}
