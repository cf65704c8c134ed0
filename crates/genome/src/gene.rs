//! The genes by name ([`Gene`]): the generic view the mutator, crossover and the
//! enumerator use, with each gene's alleles as written in TOML and the family it
//! applies to. The typed genes themselves are in [`crate::genes`].

use crate::genes::{
    BlockN, ConsumerWgs, ExpFn, Family, HopperLoad, KvLoad, Math, MinBlocks, Overlap, ProducerRegs,
    ProducerWarps, RegCap, Residence, SmemLayout, SplitKv, Stages, Switch, Tile, VecBytes, Warps,
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
}

/// Number of genes.
pub const GENES: usize = 25;

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
        )
    }

    /// Whether the gene shapes a kernel of `family`. A gene that does not apply is
    /// held at its baseline value by [`crate::Genome::canonical`] and left out of the id:
    /// the Hopper template has no warp layout, residence or load-width choice of the
    /// Ampere kind (wgmma fixes them), and the Ampere template reads no Hopper gene.
    pub fn applies(self, family: Family) -> bool {
        match self {
            Gene::Family => true,
            Gene::BlockN | Gene::Stages | Gene::Exp | Gene::SplitKv | Gene::PackGqa => true,
            Gene::ConsumerWgs
            | Gene::HopperLoad
            | Gene::ProducerRegs
            | Gene::Pingpong
            | Gene::SoftmaxOverlap
            | Gene::Persistent
            | Gene::ClusterCombine => family == Family::Hopper,
            _ => family == Family::Ampere,
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
        }
    }
}

impl fmt::Display for Gene {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
