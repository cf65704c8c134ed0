//! The genes by name ([`Gene`]): the generic view the mutator, crossover and the
//! enumerator use, with each gene's alleles as written in TOML and the family it
//! applies to, and a genome read and written through it ([`Genome::allele_index`],
//! [`Genome::with_allele`]). The typed genes themselves are in [`crate::genes`].

use crate::genes::{
    BlockN, ConsumerWgs, DkvSplit, DqMode, ExpFn, Family, Genome, HopperLoad, KvLoad, Math,
    MinBlocks, OStore, Overlap, ProducerRegs, ProducerWarps, RegCap, Residence, SmemLayout,
    SplitKv, Stages, Switch, Tile, VecBytes, Warps, WgSplit,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The name of a gene, for the generic operations (mutation, crossover, enumeration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gene {
    QkMath,
    PvMath,
    PPath,
    OAccum,
    BlockM,
    BlockN,
    Warps,
    ProducerWarps,
    KvLoad,
    Stages,
    SmemLayout,
    VecBytes,
    Exp,
    SplitKv,
    RegCap,
    MinBlocks,
    Family,
    ConsumerWgs,
    HopperLoad,
    ProducerRegs,
    Pingpong,
    SoftmaxOverlap,
    Persistent,
    PackGqa,
    ClusterCombine,
    OStore,
    WgSplit,
    DqMode,
    DkvSplit,
}

/// Number of genes.
pub const GENES: usize = 29;

impl Gene {
    /// All genes in canonical order.
    pub const ALL: [Gene; GENES] = [
        Gene::QkMath,
        Gene::PvMath,
        Gene::PPath,
        Gene::OAccum,
        Gene::BlockM,
        Gene::BlockN,
        Gene::Warps,
        Gene::ProducerWarps,
        Gene::KvLoad,
        Gene::Stages,
        Gene::SmemLayout,
        Gene::VecBytes,
        Gene::Exp,
        Gene::SplitKv,
        Gene::RegCap,
        Gene::MinBlocks,
        Gene::Family,
        Gene::ConsumerWgs,
        Gene::HopperLoad,
        Gene::ProducerRegs,
        Gene::Pingpong,
        Gene::SoftmaxOverlap,
        Gene::Persistent,
        Gene::PackGqa,
        Gene::ClusterCombine,
        Gene::OStore,
        Gene::WgSplit,
        Gene::DqMode,
        Gene::DkvSplit,
    ];

    /// The field name used in TOML and reports.
    pub fn name(self) -> &'static str {
        match self {
            Gene::QkMath => "qk_math",
            Gene::PvMath => "pv_math",
            Gene::PPath => "p_path",
            Gene::OAccum => "o_accum",
            Gene::BlockM => "block_m",
            Gene::BlockN => "block_n",
            Gene::Warps => "warps",
            Gene::ProducerWarps => "producer_warps",
            Gene::KvLoad => "kv_load",
            Gene::Stages => "stages",
            Gene::SmemLayout => "smem_layout",
            Gene::VecBytes => "vec_bytes",
            Gene::Exp => "exp",
            Gene::SplitKv => "split_kv",
            Gene::RegCap => "reg_cap",
            Gene::MinBlocks => "min_blocks",
            Gene::Family => "family",
            Gene::ConsumerWgs => "consumer_wgs",
            Gene::HopperLoad => "hopper_load",
            Gene::ProducerRegs => "producer_regs",
            Gene::Pingpong => "pingpong",
            Gene::SoftmaxOverlap => "softmax_overlap",
            Gene::Persistent => "persistent",
            Gene::PackGqa => "pack_gqa",
            Gene::ClusterCombine => "cluster_combine",
            Gene::OStore => "o_store",
            Gene::WgSplit => "wg_split",
            Gene::DqMode => "dq_mode",
            Gene::DkvSplit => "dkv_split",
        }
    }

    /// Parses a gene's field name.
    pub fn from_name(name: &str) -> Option<Gene> {
        Gene::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Ordered genes mutate to a neighbouring allele; categorical ones to any other.
    pub fn is_ordered(self) -> bool {
        !matches!(
            self,
            Gene::QkMath
                | Gene::PvMath
                | Gene::PPath
                | Gene::OAccum
                | Gene::KvLoad
                | Gene::SmemLayout
                | Gene::Exp
                | Gene::Family
                | Gene::HopperLoad
                | Gene::Pingpong
                | Gene::SoftmaxOverlap
                | Gene::Persistent
                | Gene::PackGqa
                | Gene::ClusterCombine
                | Gene::OStore
                | Gene::WgSplit
                | Gene::DqMode
                | Gene::DkvSplit
        )
    }

    /// Whether the gene shapes a kernel of `family`. A gene that does not apply is
    /// held at its baseline value by [`crate::Genome::canonical`] and left out of the id:
    /// the Hopper template has no warp layout, residence or load-width choice of the
    /// Ampere kind (wgmma fixes them), and the Ampere template reads no Hopper gene.
    /// The backward family `ampere_bwd` is mma.sync by definition, with P and dS in
    /// registers: no math, residence or producer gene; the backward families have no
    /// split or packed heads (a CTA owns keys and loops over the group's query heads), and
    /// `dq_mode` is theirs. `hopper_bwd` reads the forward Hopper genes that mean the same
    /// there (consumer warpgroups, setmaxnreg, stages, exp) and block_m (the query rows of
    /// a step); its keys per CTA are 64 per consumer warpgroup, so block_n is no gene of
    /// it, and its producer streams Q and dO with cp.async (no load gene, no Hopper
    /// forward scheduling gene); `dkv_split` (keys per warpgroup, or per pair of them each
    /// holding half the columns of dK and dV) is its own.
    pub fn applies(self, family: Family) -> bool {
        let forward = family.pass() == crate::Pass::Forward;
        match self {
            Gene::Family => true,
            Gene::Stages | Gene::Exp => true,
            Gene::BlockN => family != Family::HopperBwd,
            Gene::SplitKv | Gene::PackGqa => forward,
            Gene::ConsumerWgs | Gene::ProducerRegs => {
                matches!(family, Family::Hopper | Family::HopperBwd)
            }
            Gene::HopperLoad
            | Gene::Pingpong
            | Gene::SoftmaxOverlap
            | Gene::Persistent
            | Gene::ClusterCombine
            | Gene::OStore
            | Gene::WgSplit => family == Family::Hopper,
            Gene::DqMode => !forward,
            Gene::DkvSplit => family == Family::HopperBwd,
            Gene::BlockM => family != Family::Hopper,
            Gene::Warps
            | Gene::KvLoad
            | Gene::SmemLayout
            | Gene::VecBytes
            | Gene::RegCap
            | Gene::MinBlocks => matches!(family, Family::Ampere | Family::AmpereBwd),
            Gene::QkMath | Gene::PvMath | Gene::PPath | Gene::OAccum | Gene::ProducerWarps => {
                family == Family::Ampere
            }
        }
    }

    /// Number of alleles.
    pub fn allele_count(self) -> usize {
        self.allele_labels().len()
    }

    /// The alleles as written in TOML, in index order.
    pub fn allele_labels(self) -> Vec<String> {
        fn labels<T: fmt::Display>(all: &[T]) -> Vec<String> {
            all.iter().map(|a| a.to_string()).collect()
        }
        match self {
            Gene::QkMath | Gene::PvMath => labels(Math::ALL),
            Gene::PPath | Gene::OAccum => labels(Residence::ALL),
            Gene::BlockM => labels(Tile::ALL),
            Gene::BlockN => labels(BlockN::ALL),
            Gene::Warps => labels(Warps::ALL),
            Gene::ProducerWarps => labels(ProducerWarps::ALL),
            Gene::KvLoad => labels(KvLoad::ALL),
            Gene::Stages => labels(Stages::ALL),
            Gene::SmemLayout => labels(SmemLayout::ALL),
            Gene::VecBytes => labels(VecBytes::ALL),
            Gene::Exp => labels(ExpFn::ALL),
            Gene::SplitKv => labels(SplitKv::ALL),
            Gene::RegCap => RegCap::ALL
                .iter()
                .map(|c| match c {
                    RegCap::None => "none".to_string(),
                    c => c.to_string(),
                })
                .collect(),
            Gene::MinBlocks => labels(MinBlocks::ALL),
            Gene::Family => labels(Family::ALL),
            Gene::ConsumerWgs => labels(ConsumerWgs::ALL),
            Gene::HopperLoad => labels(HopperLoad::ALL),
            Gene::ProducerRegs => ProducerRegs::ALL
                .iter()
                .map(|c| match c {
                    ProducerRegs::None => "none".to_string(),
                    c => c.to_string(),
                })
                .collect(),
            Gene::Pingpong | Gene::Persistent | Gene::PackGqa | Gene::ClusterCombine => {
                labels(Switch::ALL)
            }
            Gene::SoftmaxOverlap => labels(Overlap::ALL),
            Gene::OStore => labels(OStore::ALL),
            Gene::WgSplit => labels(WgSplit::ALL),
            Gene::DqMode => labels(DqMode::ALL),
            Gene::DkvSplit => labels(DkvSplit::ALL),
        }
    }
}

impl fmt::Display for Gene {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn index_of<T: PartialEq>(all: &[T], v: &T) -> usize {
    all.iter()
        .position(|a| a == v)
        .expect("every allele is listed in ALL")
}

impl Genome {
    /// The allele index of one gene (position in that gene's allele list).
    pub fn allele_index(&self, gene: Gene) -> usize {
        match gene {
            Gene::QkMath => index_of(Math::ALL, &self.qk_math),
            Gene::PvMath => index_of(Math::ALL, &self.pv_math),
            Gene::PPath => index_of(Residence::ALL, &self.p_path),
            Gene::OAccum => index_of(Residence::ALL, &self.o_accum),
            Gene::BlockM => index_of(Tile::ALL, &self.block_m),
            Gene::BlockN => index_of(BlockN::ALL, &self.block_n),
            Gene::Warps => index_of(Warps::ALL, &self.warps),
            Gene::ProducerWarps => index_of(ProducerWarps::ALL, &self.producer_warps),
            Gene::KvLoad => index_of(KvLoad::ALL, &self.kv_load),
            Gene::Stages => index_of(Stages::ALL, &self.stages),
            Gene::SmemLayout => index_of(SmemLayout::ALL, &self.smem_layout),
            Gene::VecBytes => index_of(VecBytes::ALL, &self.vec_bytes),
            Gene::Exp => index_of(ExpFn::ALL, &self.exp),
            Gene::SplitKv => index_of(SplitKv::ALL, &self.split_kv),
            Gene::RegCap => index_of(RegCap::ALL, &self.reg_cap),
            Gene::MinBlocks => index_of(MinBlocks::ALL, &self.min_blocks),
            Gene::Family => index_of(Family::ALL, &self.family),
            Gene::ConsumerWgs => index_of(ConsumerWgs::ALL, &self.consumer_wgs),
            Gene::HopperLoad => index_of(HopperLoad::ALL, &self.hopper_load),
            Gene::ProducerRegs => index_of(ProducerRegs::ALL, &self.producer_regs),
            Gene::Pingpong => index_of(Switch::ALL, &self.pingpong),
            Gene::SoftmaxOverlap => index_of(Overlap::ALL, &self.softmax_overlap),
            Gene::Persistent => index_of(Switch::ALL, &self.persistent),
            Gene::PackGqa => index_of(Switch::ALL, &self.pack_gqa),
            Gene::ClusterCombine => index_of(Switch::ALL, &self.cluster_combine),
            Gene::OStore => index_of(OStore::ALL, &self.o_store),
            Gene::WgSplit => index_of(WgSplit::ALL, &self.wg_split),
            Gene::DqMode => index_of(DqMode::ALL, &self.dq_mode),
            Gene::DkvSplit => index_of(DkvSplit::ALL, &self.dkv_split),
        }
    }

    /// A copy with one gene set to the allele at `index`.
    ///
    /// # Panics
    /// If `index >= gene.allele_count()`: callers draw indices from that count.
    pub fn with_allele(&self, gene: Gene, index: usize) -> Genome {
        let mut g = *self;
        match gene {
            Gene::QkMath => g.qk_math = Math::ALL[index],
            Gene::PvMath => g.pv_math = Math::ALL[index],
            Gene::PPath => g.p_path = Residence::ALL[index],
            Gene::OAccum => g.o_accum = Residence::ALL[index],
            Gene::BlockM => g.block_m = Tile::ALL[index],
            Gene::BlockN => g.block_n = BlockN::ALL[index],
            Gene::Warps => g.warps = Warps::ALL[index],
            Gene::ProducerWarps => g.producer_warps = ProducerWarps::ALL[index],
            Gene::KvLoad => g.kv_load = KvLoad::ALL[index],
            Gene::Stages => g.stages = Stages::ALL[index],
            Gene::SmemLayout => g.smem_layout = SmemLayout::ALL[index],
            Gene::VecBytes => g.vec_bytes = VecBytes::ALL[index],
            Gene::Exp => g.exp = ExpFn::ALL[index],
            Gene::SplitKv => g.split_kv = SplitKv::ALL[index],
            Gene::RegCap => g.reg_cap = RegCap::ALL[index],
            Gene::MinBlocks => g.min_blocks = MinBlocks::ALL[index],
            Gene::Family => g.family = Family::ALL[index],
            Gene::ConsumerWgs => g.consumer_wgs = ConsumerWgs::ALL[index],
            Gene::HopperLoad => g.hopper_load = HopperLoad::ALL[index],
            Gene::ProducerRegs => g.producer_regs = ProducerRegs::ALL[index],
            Gene::Pingpong => g.pingpong = Switch::ALL[index],
            Gene::SoftmaxOverlap => g.softmax_overlap = Overlap::ALL[index],
            Gene::Persistent => g.persistent = Switch::ALL[index],
            Gene::PackGqa => g.pack_gqa = Switch::ALL[index],
            Gene::ClusterCombine => g.cluster_combine = Switch::ALL[index],
            Gene::OStore => g.o_store = OStore::ALL[index],
            Gene::WgSplit => g.wg_split = WgSplit::ALL[index],
            Gene::DqMode => g.dq_mode = DqMode::ALL[index],
            Gene::DkvSplit => g.dkv_split = DkvSplit::ALL[index],
        }
        g
    }

    /// The allele of one gene as written in TOML.
    pub fn allele_label(&self, gene: Gene) -> String {
        gene.allele_labels().swap_remove(self.allele_index(gene))
    }

    /// All allele indices in canonical gene order.
    pub fn allele_indices(&self) -> [usize; GENES] {
        Gene::ALL.map(|g| self.allele_index(g))
    }

    /// Builds a genome from allele indices in canonical gene order.
    pub fn from_allele_indices(indices: [usize; GENES]) -> Genome {
        let mut g = Genome::baseline();
        for (gene, idx) in Gene::ALL.into_iter().zip(indices) {
            g = g.with_allele(gene, idx);
        }
        g
    }
}
