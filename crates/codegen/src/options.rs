//! NVRTC compiler flags, built from a typed struct (as cudarc's `CompileOptions`).
//!
//! Every flag string is spelled out in one place and unit-tested, so a change of
//! spelling shows up as a failing test rather than as NVRTC silently ignoring
//! an option (which it does not do: unknown options fail the compile, with a
//! log that is easy to misread as a template error).

use evo_genome::Target;
use std::path::PathBuf;

/// Options of one NVRTC compile, apart from the macro definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// `--gpu-architecture=sm_XX`: a real architecture, so NVRTC produces a CUBIN
    /// and runs ptxas (whose `-v` report gives registers and spills).
    pub target: Target,
    /// `sm_90a` instead of `sm_90`: the architecture-specific features (wgmma,
    /// setmaxnreg) of the Hopper family. The CUBIN then runs on sm_90 parts only.
    pub arch_specific: bool,
    /// `--maxrregcount=N`; `None` lets ptxas choose (up to 255).
    pub reg_cap: Option<u32>,
    /// `-I<dir>` for each, in order (the CUDA headers' directory among them).
    pub include_dirs: Vec<PathBuf>,
    /// `--ptxas-options=-v`: ptxas writes the resource report into the program log.
    pub verbose_ptxas: bool,
    /// Further flags, appended verbatim (e.g. `-lineinfo`).
    pub extra: Vec<String>,
}

impl CompileOptions {
    /// Options for `target` with the ptxas report on, no cap, no include dirs.
    pub fn new(target: Target) -> CompileOptions {
        CompileOptions {
            target,
            arch_specific: false,
            reg_cap: None,
            include_dirs: Vec::new(),
            verbose_ptxas: true,
            extra: Vec::new(),
        }
    }

    /// The exact flag strings handed to `nvrtcCompileProgram`.
    ///
    /// `--use_fast_math` is deliberately never set: it would turn `expf` into
    /// `ex2.approx.ftz` and flush denormals, making the `exp` gene's two alleles the
    /// same kernel and the GREEN tolerances meaningless.
    pub fn build(&self) -> Vec<String> {
        let suffix = if self.arch_specific { "a" } else { "" };
        let mut flags = vec![
            format!("--gpu-architecture={}{suffix}", self.target.arch()),
            "--std=c++17".to_string(),
        ];
        if let Some(cap) = self.reg_cap {
            flags.push(format!("--maxrregcount={cap}"));
        }
        for dir in &self.include_dirs {
            flags.push(format!("-I{}", dir.display()));
        }
        if self.verbose_ptxas {
            flags.push("--ptxas-options=-v".to_string());
        }
        flags.extend(self.extra.iter().cloned());
        flags
    }
}
