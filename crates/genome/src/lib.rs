//! The genome of a FlashAttention-style forward kernel.
//!
//! This crate knows no CUDA: it holds the genes ([`Genome`]), the attention
//! [`Problem`], the devices' resource limits ([`Target`]), the validity rules
//! ([`rules`]), the canonical id, TOML load/save with errors that name the file,
//! line and field ([`file`]), and the valid space ([`space`]). Everything above it
//! (codegen, gates, search) takes a genome that this crate has accepted.

pub mod file;
pub mod genes;
pub mod problem;
pub mod rules;
pub mod space;
pub mod target;

pub use file::{from_toml, GenomeError, GenomeFile, TomlError};
pub use genes::{
    ExpFn, Gene, Genome, KvLoad, Math, MinBlocks, ProducerWarps, RegCap, Residence, SmemLayout,
    SplitKv, Stages, Tile, VecBytes, Warps,
};
pub use problem::{Dtype, HeadDim, Problem};
pub use rules::{Rule, SmemPlan, Violation};
pub use target::Target;

/// A stable identifier of a genome: a hash of its genes, not of any TOML text.
///
/// Hashes `gene=allele;` pairs in canonical gene order, so reordering a file's
/// lines or adding comments never changes the id; 16 hex digits of BLAKE3.
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
        for gene in Gene::ALL {
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

    /// One-line summary: `mma/mma P:regs O:regs 64x64 w4+p0 cp_async s2 swizzled v16 exp2 split1`.
    pub fn summary(&self) -> String {
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
