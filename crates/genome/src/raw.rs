//! A genome as written in TOML ([`RawGenome`]), before its family decides which genes
//! must be present; [`Genome`] is read through it.

use crate::genes::{
    producer_regs_serde, reg_cap_serde, BlockN, ConsumerWgs, DkvSplit, DqMode, ExpFn, Family, Gene,
    Genome, HopperLoad, KvLoad, Math, MinBlocks, OStore, Overlap, ProducerRegs, ProducerWarps,
    RegCap, Residence, SmemLayout, SplitKv, Stages, Switch, Tile, VecBytes, Warps, WgSplit,
};
use serde::Deserialize;

/// A genome as written, before the family decides which genes must be present.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGenome {
    qk_math: Option<Math>,
    pv_math: Option<Math>,
    p_path: Option<Residence>,
    o_accum: Option<Residence>,
    block_m: Option<Tile>,
    block_n: Option<BlockN>,
    warps: Option<Warps>,
    producer_warps: Option<ProducerWarps>,
    kv_load: Option<KvLoad>,
    stages: Option<Stages>,
    smem_layout: Option<SmemLayout>,
    vec_bytes: Option<VecBytes>,
    exp: Option<ExpFn>,
    split_kv: Option<SplitKv>,
    reg_cap: Option<RegCapField>,
    min_blocks: Option<MinBlocks>,
    #[serde(default)]
    family: Family,
    #[serde(default)]
    consumer_wgs: ConsumerWgs,
    #[serde(default)]
    hopper_load: HopperLoad,
    #[serde(default)]
    producer_regs: ProducerRegsField,
    #[serde(default)]
    pingpong: Switch,
    #[serde(default)]
    softmax_overlap: Overlap,
    #[serde(default)]
    persistent: Switch,
    #[serde(default)]
    pack_gqa: Switch,
    #[serde(default)]
    cluster_combine: Switch,
    #[serde(default)]
    o_store: OStore,
    #[serde(default)]
    wg_split: WgSplit,
    #[serde(default)]
    dq_mode: DqMode,
    #[serde(default)]
    dkv_split: DkvSplit,
}

#[derive(Deserialize)]
#[serde(transparent)]
struct RegCapField(#[serde(with = "reg_cap_serde")] RegCap);

#[derive(Deserialize)]
#[serde(transparent)]
struct ProducerRegsField(#[serde(with = "producer_regs_serde")] ProducerRegs);

impl TryFrom<RawGenome> for Genome {
    type Error = String;

    fn try_from(r: RawGenome) -> Result<Genome, String> {
        let base = Genome::baseline();
        let mut missing = Vec::new();
        // Every Ampere record states the 16 genes it always had; another family's
        // genome must state those of them its family reads, and may leave out the rest.
        let ampere = r.family == Family::Ampere;
        let mut take = |gene: Gene, found: bool| {
            if !found && (gene.applies(r.family) || ampere) {
                missing.push(gene);
            }
        };
        take(Gene::QkMath, r.qk_math.is_some());
        take(Gene::PvMath, r.pv_math.is_some());
        take(Gene::PPath, r.p_path.is_some());
        take(Gene::OAccum, r.o_accum.is_some());
        take(Gene::BlockM, r.block_m.is_some());
        take(Gene::BlockN, r.block_n.is_some());
        take(Gene::Warps, r.warps.is_some());
        take(Gene::ProducerWarps, r.producer_warps.is_some());
        take(Gene::KvLoad, r.kv_load.is_some());
        take(Gene::Stages, r.stages.is_some());
        take(Gene::SmemLayout, r.smem_layout.is_some());
        take(Gene::VecBytes, r.vec_bytes.is_some());
        take(Gene::Exp, r.exp.is_some());
        take(Gene::SplitKv, r.split_kv.is_some());
        take(Gene::RegCap, r.reg_cap.is_some());
        take(Gene::MinBlocks, r.min_blocks.is_some());
        if !missing.is_empty() {
            return Err(crate::strict::missing_message(r.family, &missing));
        }
        Ok(Genome {
            qk_math: r.qk_math.unwrap_or(base.qk_math),
            pv_math: r.pv_math.unwrap_or(base.pv_math),
            p_path: r.p_path.unwrap_or(base.p_path),
            o_accum: r.o_accum.unwrap_or(base.o_accum),
            block_m: r.block_m.unwrap_or(base.block_m),
            block_n: r.block_n.unwrap_or(base.block_n),
            warps: r.warps.unwrap_or(base.warps),
            producer_warps: r.producer_warps.unwrap_or(base.producer_warps),
            kv_load: r.kv_load.unwrap_or(base.kv_load),
            stages: r.stages.unwrap_or(base.stages),
            smem_layout: r.smem_layout.unwrap_or(base.smem_layout),
            vec_bytes: r.vec_bytes.unwrap_or(base.vec_bytes),
            exp: r.exp.unwrap_or(base.exp),
            split_kv: r.split_kv.unwrap_or(base.split_kv),
            reg_cap: r.reg_cap.map_or(base.reg_cap, |c| c.0),
            min_blocks: r.min_blocks.unwrap_or(base.min_blocks),
            family: r.family,
            consumer_wgs: r.consumer_wgs,
            hopper_load: r.hopper_load,
            producer_regs: r.producer_regs.0,
            pingpong: r.pingpong,
            softmax_overlap: r.softmax_overlap,
            persistent: r.persistent,
            pack_gqa: r.pack_gqa,
            cluster_combine: r.cluster_combine,
            o_store: r.o_store,
            wg_split: r.wg_split,
            dq_mode: r.dq_mode,
            dkv_split: r.dkv_split,
        })
    }
}

impl Default for ProducerRegsField {
    fn default() -> ProducerRegsField {
        ProducerRegsField(ProducerRegs::None)
    }
}
