//! Late compiles: the full gate's variants of a candidate about to be crowned.

use crate::compiler::{remove_files, write_variant};
use crate::cubin_cache::{compile_cached, CubinCache};
use crate::protocol::{VariantFile, WorkerRequest};
use crate::tally::CompileTally;
use evo_codegen::Toolchain;
use evo_gates::compile::{variants_for, KernelSource};
use evo_genome::{Dtype, HeadDim, Problem, Target};
use std::path::PathBuf;
use std::sync::Arc;

/// Compiles the full gate's remaining variants of one candidate, when it is about to
/// be crowned: most candidates never get there, so compiling them for every candidate
/// would double the compile work of a search for nothing.
#[derive(Clone)]
pub struct LateCompiler {
    pub(crate) toolchain: Toolchain,
    pub(crate) target: Target,
    pub(crate) cubin_dir: PathBuf,
    pub(crate) cache: Option<Arc<CubinCache>>,
    /// The run's compile tally (the batch compiler's).
    pub(crate) tally: Arc<CompileTally>,
}

impl LateCompiler {
    /// Adds to `request.variants` every variant its full gate needs and lacks; the
    /// files written, or the compile log of the first variant that failed.
    fn complete(&self, request: &mut WorkerRequest) -> Result<Vec<VariantFile>, String> {
        let have: Vec<(HeadDim, Dtype)> = request
            .variants
            .iter()
            .map(|v| (v.head_dim, v.dtype))
            .collect();
        let problems: Vec<Problem> = request.full_gate.iter().map(|c| c.problem).collect();
        let missing: Vec<(HeadDim, Dtype)> = variants_for(&problems)
            .into_iter()
            .filter(|v| !have.contains(v))
            .collect();
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        let source = KernelSource::Genome {
            name: request.genome.id().to_string(),
            genome: request.genome,
        };
        let built = compile_cached(
            &self.toolchain,
            self.cache.as_deref(),
            &source,
            &missing,
            self.target,
        );
        self.tally.add(&built);
        let mut files = Vec::new();
        for v in built {
            match v.result {
                Ok(compiled) => {
                    let stem = format!("{}-full", request.genome.id());
                    match write_variant(
                        &self.cubin_dir,
                        &stem,
                        v.head_dim,
                        v.dtype,
                        &compiled.cubin,
                    ) {
                        Ok(file) => files.push(file),
                        Err(e) => {
                            remove_files(&files);
                            return Err(e);
                        }
                    }
                }
                Err(log) => {
                    remove_files(&files);
                    return Err(format!(
                        "the full gate's D{} {} variant did not compile: {log}",
                        v.head_dim, v.dtype
                    ));
                }
            }
        }
        request.variants.extend(files.iter().cloned());
        Ok(files)
    }
}

/// A new best's request with the full gate's variants added (or why they did not
/// compile), ready for its confirmation run.
pub(crate) struct LateCompiled {
    pub(crate) request: WorkerRequest,
    pub(crate) files: Result<Vec<VariantFile>, String>,
}

/// Compiles what a new best's full gate needs beyond its screen (nothing without a
/// late compiler); may run on a thread of its own while the GPU goes on.
pub(crate) fn late_compile(late: Option<LateCompiler>, mut request: WorkerRequest) -> LateCompiled {
    request.confirm = true;
    let files = match late {
        None => Ok(Vec::new()),
        Some(l) => l.complete(&mut request),
    };
    LateCompiled { request, files }
}

/// A new best waiting for its confirmation, in a runner's stream.
pub(crate) struct Confirming {
    pub(crate) index: usize,
    pub(crate) first_us: f64,
    /// The screen's evaluation: the record when, by its turn, a best confirmed
    /// meanwhile (on any GPU) is as fast, so no confirmation runs.
    pub(crate) screened: evo_gates::outcome::Evaluation,
    /// The screen's CUBINs, removed once the confirmation has run.
    pub(crate) screening: Vec<VariantFile>,
    pub(crate) late: Late,
}

/// Where a new best's full gate stands.
pub(crate) enum Late {
    /// Its variants compiling on a thread of their own (the new best holds a claim on
    /// the pool's bar for its screen).
    Compiling(std::thread::JoinHandle<LateCompiled>),
    /// Not compiled: a screen as fast, on some GPU, was already waiting for its own
    /// confirmation, which will most likely leave this one no new best at all. It
    /// compiles only if that confirmation does not lower the bar below it.
    Deferred(Box<WorkerRequest>),
}

impl Late {
    /// Starts the full gate's compile of `request` on a thread of its own.
    pub(crate) fn compile(late: Option<LateCompiler>, request: WorkerRequest) -> Late {
        Late::Compiling(std::thread::spawn(move || late_compile(late, request)))
    }
}
