//! The genome of a FlashAttention-style attention kernel, forward or backward ([`Pass`]).
//!
//! This crate knows no CUDA: it holds the genes ([`Genome`]), the attention
//! [`Problem`], the devices' resource limits ([`Target`]), the validity rules
//! ([`rules`]), the canonical id, TOML load/save with errors that name the file,
//! line and field ([`file`](mod@file)), and the valid space ([`space`]). Everything above it
//! (codegen, gates, search) takes a genome that this crate has accepted.

pub mod budget;
pub mod dispatch;
pub mod file;
pub mod gene;
pub mod genes;
pub mod head_dim;
mod pass;
pub mod problem;
mod raw;
pub mod rules;
pub mod space;
mod spec;
mod strict;
pub mod target;

pub use file::{from_toml, GenomeError, GenomeFile, TomlError};
pub use genes::{
    BlockN, ConsumerWgs, DkvSplit, DqMode, ExpFn, Family, Gene, Genome, HopperLoad, KvLoad, Math,
    MinBlocks, OStore, Overlap, ProducerRegs, ProducerWarps, RegCap, Residence, SmemLayout,
    SplitKv, Stages, Switch, Tile, VecBytes, Warps, WgSplit, GENES,
};
pub use pass::Pass;
pub use problem::{Dtype, HeadDim, MaskAlign, MaskArgs, Problem, MAX_DIM, SPEC_FORM};
pub use rules::{Rule, SmemPlan, Violation};
pub use target::Target;

/// A stable identifier of a genome: a hash of its genes, not of any TOML text.
///
/// Hashes `gene=allele;` pairs in canonical gene order, so reordering a file's
/// lines or adding comments never changes the id; 16 hex digits of BLAKE3. Only the
/// genes that apply to the genome's family are hashed ([`Gene::applies`]), so two
/// genomes that are the same kernel share an id; an Ampere genome hashes its 16
/// genes without naming the family, which keeps every id recorded before the Hopper
/// family existed. The other families hash `family=...;`, and only the backward families
/// have `dq_mode`, so no forward id changed when the backward genes came; `dkv_split`
/// is hashed only when it is `columns`, so no backward id changed when it came.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct GenomeId(pub String);

impl std::fmt::Display for GenomeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Genome {
    /// The canonical id (see [`GenomeId`]).
    pub fn id(&self) -> GenomeId {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"evo-genome-v1\n");
        for gene in self.genes() {
            // A gene added after genomes were recorded is hashed only away from the value
            // those records imply, so every recorded id stays the same kernel's id.
            let implied = match gene {
                Gene::Family => self.family == Family::Ampere,
                Gene::Persistent => self.persistent == Switch::Off,
                Gene::PackGqa => self.pack_gqa == Switch::Off,
                Gene::ClusterCombine => self.cluster_combine == Switch::Off,
                Gene::OStore => self.o_store == OStore::Staged,
                Gene::WgSplit => self.wg_split == WgSplit::Rows,
                Gene::DkvSplit => self.dkv_split == DkvSplit::Keys,
                _ => false,
            };
            if implied {
                continue;
            }
            hasher.update(gene.name().as_bytes());
            hasher.update(b"=");
            hasher.update(self.allele_label(gene).as_bytes());
            hasher.update(b";");
        }
        let hex = hasher.finalize().to_hex();
        GenomeId(hex[..16].to_string())
    }

    /// All rule violations of this genome for a head dimension on a device.
    pub fn violations(&self, head_dim: HeadDim, target: Target) -> Vec<Violation> {
        rules::violations(self, head_dim, target)
    }

    /// True when the genome can run at this head dimension on this device.
    pub fn is_valid(&self, head_dim: HeadDim, target: Target) -> bool {
        rules::is_valid(self, head_dim, target)
    }

    /// The shared-memory plan at a head dimension.
    pub fn smem(&self, head_dim: HeadDim) -> SmemPlan {
        SmemPlan::new(self, head_dim)
    }

    /// One-line summary: `mma/mma P:regs O:regs 64x64 w4+p0 cp_async s2 swizzled v16 exp2 split1`,
    /// for the Hopper family `hopper wgmma 128x128 wg2 tma s2 exp2 split1 regs:24`, for
    /// the backward `ampere_bwd 128x64 w8 cp_async s2 swizzled v16 exp2 dq:atomic cap:none
    /// mb1` (keys per CTA x query rows per step), for the Hopper backward `hopper_bwd
    /// 128x64 wg2 s3 exp2 dq:atomic regs:32` (with ` split:columns` after it when the
    /// warpgroups split the columns of dK and dV).
    pub fn summary(&self) -> String {
        if self.family == Family::HopperBwd {
            return format!(
                "hopper_bwd {}x{} wg{} s{} {} dq:{} regs:{}{}",
                rules::hopper_bwd_block_n(self),
                self.block_m,
                self.consumer_wgs,
                self.stages,
                self.exp,
                self.dq_mode,
                self.allele_label(Gene::ProducerRegs),
                if self.dkv_split == DkvSplit::Columns {
                    " split:columns"
                } else {
                    ""
                }
            );
        }
        if self.family == Family::AmpereBwd {
            return format!(
                "ampere_bwd {}x{} w{} {} s{} {} v{} {} dq:{} cap:{} mb{}",
                self.block_n,
                self.block_m,
                self.warps,
                self.kv_load,
                self.stages,
                self.smem_layout,
                self.vec_bytes,
                self.exp,
                self.dq_mode,
                self.allele_label(Gene::RegCap),
                self.min_blocks
            );
        }
        if self.family == Family::Hopper {
            return format!(
                "hopper wgmma {}x{} wg{}{} {} s{} {} split{}{} regs:{} pingpong:{} overlap:{}{}",
                self.rows_per_cta(),
                self.block_n,
                self.consumer_wgs,
                if self.wg_split == WgSplit::Keys {
                    ":keys"
                } else {
                    ""
                },
                self.hopper_load,
                self.stages,
                self.exp,
                self.split_kv,
                if self.cluster_combine == Switch::On {
                    "+cluster"
                } else {
                    ""
                },
                self.allele_label(Gene::ProducerRegs),
                self.pingpong,
                self.softmax_overlap,
                match self.o_store {
                    OStore::Staged => "",
                    OStore::Direct => " o:direct",
                    OStore::Tma => " o:tma",
                }
            );
        }
        format!(
            "{}/{} P:{} O:{} {}x{} w{}+p{} {} s{} {} v{} {} split{} cap:{} mb{}",
            self.qk_math,
            self.pv_math,
            self.p_path,
            self.o_accum,
            self.block_m,
            self.block_n,
            self.warps,
            self.producer_warps,
            self.kv_load,
            self.stages,
            self.smem_layout,
            self.vec_bytes,
            self.exp,
            self.split_kv,
            self.allele_label(Gene::RegCap),
            self.min_blocks
        )
    }
}

#[cfg(test)]
mod tests;
