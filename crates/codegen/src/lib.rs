//! Genome -> macro definitions -> NVRTC -> PTX, CUBIN and the ptxas resource report.
//!
//! There is one CUDA template per kernel family, `kernels/attention.cu` (Ampere),
//! `kernels/attention_sm90.cu` (Hopper, built for sm_90a), `kernels/attention_bwd.cu`
//! (the backward pass) and `kernels/attention_bwd_sm90.cu` (the Hopper backward, sm_90a),
//! compiled into this crate as text. A genome never becomes generated CUDA: it becomes a list of integer
//! `-D EVO_*` macros ([`defines`]) that its family's template reads, so what runs is
//! always a file a CUDA engineer can open, and a hand-written `.cu` with the same ABI
//! goes through the same path ([`compile_source`]).
//!
//! Compiles need NVRTC but no GPU: [`Toolchain::discover`] finds the headers and
//! `libnvrtc` (see [`toolchain`] for where it looks) and fails with an install
//! hint instead of panicking. Compiles are independent and NVRTC is thread-safe,
//! so a generation compiles in parallel ([`compile_many`]).

mod defines;
mod error;
mod nvrtc;
mod options;
mod ptxas;
pub mod toolchain;

pub use defines::{build_defines, defines, Build, Defines, LSE_MACRO};
pub use error::CodegenError;
pub use nvrtc::compile_source;
pub use options::CompileOptions;
pub use ptxas::{KernelResources, PtxasReport};
pub use toolchain::{SearchPath, Toolchain};

use evo_genome::{Dtype, Family, Genome, HeadDim, Target};
use rayon::prelude::*;

/// The attention kernel's entry point (`extern "C"`).
pub const ENTRY_FWD: &str = "evo_attention_fwd";
/// The split-KV log-sum-exp combine kernel's entry point (`extern "C"`).
pub const ENTRY_COMBINE: &str = "evo_attention_combine";
/// `__constant__ int evo_geometry[6]`: launch geometry the host reads back from the module.
pub const GEOMETRY_SYMBOL: &str = "evo_geometry";
/// The backward template's four kernels (`extern "C"`, one signature; kernels/ABI.md,
/// "The backward ABI"), in launch order: dpsum and the dQ accumulator zeroed; the main
/// kernel (dK, dV, and dQ by atomics); the separate dq kernel; dQ converted.
pub const ENTRY_BWD_PRE: &str = "evo_attention_bwd_pre";
pub const ENTRY_BWD: &str = "evo_attention_bwd";
pub const ENTRY_BWD_DQ: &str = "evo_attention_bwd_dq";
pub const ENTRY_BWD_POST: &str = "evo_attention_bwd_post";
/// `__constant__ int evo_bwd_geometry[10]`: the backward's launch geometry.
pub const BWD_GEOMETRY_SYMBOL: &str = "evo_bwd_geometry";
/// The Ampere template's path relative to the repository root; also the NVRTC program
/// name, so compiler messages read `kernels/attention.cu(LINE): error ...`.
pub const TEMPLATE_PATH: &str = "kernels/attention.cu";
/// The Hopper template's path (the NVRTC program name of Hopper genomes).
pub const HOPPER_TEMPLATE_PATH: &str = "kernels/attention_sm90.cu";
/// The backward template's path (the NVRTC program name of `ampere_bwd` genomes).
pub const BWD_TEMPLATE_PATH: &str = "kernels/attention_bwd.cu";
/// The Hopper backward template's path (the NVRTC program name of `hopper_bwd` genomes).
pub const HOPPER_BWD_TEMPLATE_PATH: &str = "kernels/attention_bwd_sm90.cu";

/// The mask and K/V-head rules both templates share (kernels/mask.cuh), prepended to
/// each; a `#line` after it keeps the compiler's line numbers the template file's.
pub const MASK_PATH: &str = "kernels/mask.cuh";
// The split-KV combine both templates share, kernels/combine.cuh, is appended to each
// after its configuration (it reads the element type, `kD` and the split), behind a
// `#line` of its own.

/// The Ampere template's text (the mask rules and the mma.sync building blocks it shares
/// with the backward first, then the template's three files: configuration and staging,
/// the compute paths, the kernel; the combine last), as it was when this binary was built.
pub fn template_source() -> &'static str {
    concat!(
        include_str!("../../../kernels/mask.cuh"),
        "#line 1 \"kernels/mma.cuh\"\n",
        include_str!("../../../kernels/mma.cuh"),
        "#line 1 \"kernels/attention.cu\"\n",
        include_str!("../../../kernels/attention.cu"),
        "#line 1 \"kernels/attention_paths.cuh\"\n",
        include_str!("../../../kernels/attention_paths.cuh"),
        "#line 1 \"kernels/attention_kernel.cuh\"\n",
        include_str!("../../../kernels/attention_kernel.cuh"),
        "#line 1 \"kernels/combine.cuh\"\n",
        include_str!("../../../kernels/combine.cuh")
    )
}

/// The Hopper template's text (the mask rules, the element type and the Hopper PTX
/// wrappers it shares with the Hopper backward, and the cluster merge first, then the
/// template's three files: configuration, TMA and wgmma, the roles, the kernel; the
/// combine last), as it was when this binary was built.
pub fn hopper_template_source() -> &'static str {
    concat!(
        include_str!("../../../kernels/mask.cuh"),
        "#line 1 \"kernels/mma.cuh\"\n",
        include_str!("../../../kernels/mma.cuh"),
        "#line 1 \"kernels/sm90.cuh\"\n",
        include_str!("../../../kernels/sm90.cuh"),
        "#line 1 \"kernels/cluster.cuh\"\n",
        include_str!("../../../kernels/cluster.cuh"),
        "#line 1 \"kernels/attention_sm90.cu\"\n",
        include_str!("../../../kernels/attention_sm90.cu"),
        "#line 1 \"kernels/attention_sm90_roles.cuh\"\n",
        include_str!("../../../kernels/attention_sm90_roles.cuh"),
        "#line 1 \"kernels/attention_sm90_kernel.cuh\"\n",
        include_str!("../../../kernels/attention_sm90_kernel.cuh"),
        "#line 1 \"kernels/combine.cuh\"\n",
        include_str!("../../../kernels/combine.cuh")
    )
}

/// The backward template's text (the mask rules and the mma.sync building blocks
/// first, then the template: configuration and staging; what both backward templates
/// share (the ABI constants, pre and post); the main and dq kernels last), as it was
/// when this binary was built.
pub fn bwd_template_source() -> &'static str {
    concat!(
        include_str!("../../../kernels/mask.cuh"),
        "#line 1 \"kernels/mma.cuh\"\n",
        include_str!("../../../kernels/mma.cuh"),
        "#line 1 \"kernels/attention_bwd.cu\"\n",
        include_str!("../../../kernels/attention_bwd.cu"),
        "#line 1 \"kernels/attention_bwd_common.cuh\"\n",
        include_str!("../../../kernels/attention_bwd_common.cuh"),
        "#line 1 \"kernels/attention_bwd_kernel.cuh\"\n",
        include_str!("../../../kernels/attention_bwd_kernel.cuh")
    )
}

/// The Hopper backward template's text (the mask rules, the element type and the Hopper
/// PTX wrappers it shares with the Hopper forward first, then the template: configuration
/// and staging; what both backward templates share (the ABI constants, pre and post); the
/// generated wgmma wrappers; the main and dq kernels last), as it was when this binary
/// was built.
pub fn hopper_bwd_template_source() -> &'static str {
    concat!(
        include_str!("../../../kernels/mask.cuh"),
        "#line 1 \"kernels/mma.cuh\"\n",
        include_str!("../../../kernels/mma.cuh"),
        "#line 1 \"kernels/sm90.cuh\"\n",
        include_str!("../../../kernels/sm90.cuh"),
        "#line 1 \"kernels/attention_bwd_sm90.cu\"\n",
        include_str!("../../../kernels/attention_bwd_sm90.cu"),
        "#line 1 \"kernels/attention_bwd_common.cuh\"\n",
        include_str!("../../../kernels/attention_bwd_common.cuh"),
        "#line 1 \"kernels/attention_bwd_sm90_wgmma.cuh\"\n",
        include_str!("../../../kernels/attention_bwd_sm90_wgmma.cuh"),
        "#line 1 \"kernels/attention_bwd_sm90_kernel.cuh\"\n",
        include_str!("../../../kernels/attention_bwd_sm90_kernel.cuh")
    )
}

/// The template a genome is built from: (path, text).
pub fn template_for(genome: &Genome) -> (&'static str, &'static str) {
    match genome.family {
        Family::Ampere => (TEMPLATE_PATH, template_source()),
        Family::Hopper => (HOPPER_TEMPLATE_PATH, hopper_template_source()),
        Family::AmpereBwd => (BWD_TEMPLATE_PATH, bwd_template_source()),
        Family::HopperBwd => (HOPPER_BWD_TEMPLATE_PATH, hopper_bwd_template_source()),
    }
}

/// BLAKE3 of every template's text, 16 hex digits: part of every evaluation's cache
/// key, since the same genome is a different kernel under a different template.
pub fn template_hash() -> String {
    let mut h = blake3::Hasher::new();
    h.update(template_source().as_bytes());
    h.update(hopper_template_source().as_bytes());
    h.update(bwd_template_source().as_bytes());
    h.update(hopper_bwd_template_source().as_bytes());
    h.finalize().to_hex()[..16].to_string()
}

/// Everything one successful compile produced.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The NVRTC program name.
    pub name: String,
    pub ptx: String,
    /// Machine code for the target's real architecture (what the driver loads).
    pub cubin: Vec<u8>,
    /// The full NVRTC program log (warnings, and the ptxas report when requested).
    pub log: String,
    /// The exact flags NVRTC received, defines included.
    pub options: Vec<String>,
    pub report: PtxasReport,
    /// Wall time of create + compile + fetching PTX and CUBIN.
    pub seconds: f64,
}

/// The NVRTC options a genome compiles with: the ptxas report on, and sm_90a for the
/// Hopper families, forward and backward (wgmma, setmaxnreg; the Ampere backward,
/// mma.sync only, is built for plain sm_89 / sm_90).
pub fn genome_options(genome: &Genome, target: Target) -> CompileOptions {
    // The genome's register cap travels as EVO_MAX_REGS (see `defines`), not as
    // --maxrregcount, which the kernel's launch bounds would override.
    CompileOptions {
        arch_specific: matches!(genome.family, Family::Hopper | Family::HopperBwd),
        ..CompileOptions::new(target)
    }
}

/// Compiles the template for one genome (its plain build), after checking it against
/// the validity rules.
pub fn compile_genome(
    tc: &Toolchain,
    genome: &Genome,
    head_dim: HeadDim,
    dtype: Dtype,
    target: Target,
) -> Result<Compiled, CodegenError> {
    compile_build(tc, genome, head_dim, dtype, target, Build::Plain)
}

/// Compiles one build of a genome ([`Build`]: the plain kernels or the lse twin), after
/// checking it against the validity rules; the lse twin of a backward genome is
/// [`CodegenError::NoLseTwin`].
pub fn compile_build(
    tc: &Toolchain,
    genome: &Genome,
    head_dim: HeadDim,
    dtype: Dtype,
    target: Target,
    build: Build,
) -> Result<Compiled, CodegenError> {
    let violations = genome.violations(head_dim, target);
    if !violations.is_empty() {
        return Err(CodegenError::Invalid(violations));
    }
    let defines = build_defines(genome, head_dim, dtype, build).ok_or(CodegenError::NoLseTwin {
        family: genome.family.label(),
    })?;
    let (path, text) = template_for(genome);
    compile_source(tc, path, text, &defines, &genome_options(genome, target))
}

/// Compiles many genomes' plain builds in parallel (rayon); results are in job order.
pub fn compile_many(
    tc: &Toolchain,
    jobs: &[(Genome, HeadDim, Dtype, Target)],
) -> Vec<Result<Compiled, CodegenError>> {
    let jobs: Vec<_> = jobs
        .iter()
        .map(|&(g, d, t, target)| (g, d, t, target, Build::Plain))
        .collect();
    compile_builds(tc, &jobs)
}

/// Compiles many builds in parallel (rayon); results are in job order.
pub fn compile_builds(
    tc: &Toolchain,
    jobs: &[(Genome, HeadDim, Dtype, Target, Build)],
) -> Vec<Result<Compiled, CodegenError>> {
    jobs.par_iter()
        .map(|(genome, head_dim, dtype, target, build)| {
            compile_build(tc, genome, *head_dim, *dtype, *target, *build)
        })
        .collect()
}

#[cfg(test)]
mod tests;
