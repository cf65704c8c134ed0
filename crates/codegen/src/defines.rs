//! Genome -> `-D` macro definitions: the only contract between Rust and the template.
//!
//! The template (`kernels/attention.cu`) reads nothing but these integer macros,
//! so a CUDA engineer can compile it by hand with the same list (`evo compile
//! --emit defines` prints it). The order is fixed (the order of the genes, then
//! the derived sizes) so that option lists, logs and snapshots are stable.

use evo_genome::{
    Dtype, ExpFn, Family, Genome, HeadDim, HopperLoad, KvLoad, Math, OStore, Overlap, Residence,
    SmemLayout, Switch, WgSplit,
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

/// The macro definitions that instantiate the template for one genome.
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
    let list: [(&str, u32); 21] = [
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
    let list: [(&str, u32); 19] = [
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
    ];
    Defines(
        list.iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
    )
}
