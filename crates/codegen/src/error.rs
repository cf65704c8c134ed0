//! The codegen's errors: each says what failed and keeps everything needed to fix it
//! (the full NVRTC log and flags of a failed compile, every violated rule).

use crate::toolchain::INSTALL_HINT;
use cudarc::nvrtc::result::NvrtcError;
use evo_genome::Violation;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// No NVRTC headers + library were found; `searched` says where and why not.
    #[error(
        "NVRTC not found (needed: the CUDA headers cuda_fp16.h, cuda_bf16.h, mma.h and libnvrtc; \
         no GPU is needed). Searched:\n{}\nInstall the pinned toolchain into the repository (run at its root) with\n  \
         {INSTALL_HINT}\nor set EVO_NVRTC_DIR to a folder holding nvidia/cu13/{{include,lib}} or a \
         CUDA toolkit's {{include,lib64}}.",
        searched.iter().map(|s| format!("  - {s}")).collect::<Vec<_>>().join("\n")
    )]
    ToolchainMissing { searched: Vec<String> },

    /// Another libnvrtc was already resolvable by name and would receive the calls.
    #[error(
        "{library} is NVRTC {}.{}, but libnvrtc as found by the dynamic loader is {}.{}; \
         put {} first in LD_LIBRARY_PATH, or point EVO_NVRTC_DIR at the other toolchain",
        found.0, found.1, used.0, used.1,
        library.parent().map(|p| p.display().to_string()).unwrap_or_default()
    )]
    ToolchainMismatch {
        library: PathBuf,
        found: (i32, i32),
        used: (i32, i32),
    },

    /// The genome breaks validity rules for this head dimension and device.
    #[error(
        "the genome is invalid for this head dimension and device:\n{}",
        .0.iter().map(|v| format!("  - {v}")).collect::<Vec<_>>().join("\n")
    )]
    Invalid(Vec<Violation>),

    /// NVRTC rejected the source; `log` is the complete program log.
    #[error("NVRTC failed to compile {name}\noptions: {}\n{log}", options.join(" "))]
    Compile {
        name: String,
        log: String,
        options: Vec<String>,
    },

    /// An NVRTC API call other than the compile itself failed.
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("NVRTC call {call} failed for {name}: {error}")]
    Nvrtc {
        name: String,
        call: &'static str,
        error: NvrtcError,
    },

    /// The lse twin was asked of a genome whose template has no lse output.
    #[error(
        "a {family} genome has no lse twin: only the forward templates write the \
         log-sum-exp (kernels/ABI.md, \"The log-sum-exp output\"); compile its plain build"
    )]
    NoLseTwin { family: &'static str },

    /// C strings cannot hold NUL; a source or flag with one cannot reach NVRTC.
    #[error("{name}: the {what} contains a NUL byte")]
    NulByte { name: String, what: &'static str },
}
