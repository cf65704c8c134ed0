//! The batch compiler: candidates compiled in parallel on every core the GPU workers
//! do not need (rayon; NVRTC needs no GPU), taken from the CUBIN cache where it holds
//! them, and written to disk as CUBINs, each a request for the worker or an evaluation
//! decided without one (invalid, or failed to compile).

use crate::cubin_cache::{compile_cached, CubinCache};
use crate::plan::{GpuPlan, Plant};
use crate::protocol::{VariantFile, WorkerRequest};
use crate::tally::CompileTally;
use evo_codegen::Toolchain;
use evo_gates::compile::{compile_all, resources, variants_for, BuiltVariant, KernelSource};
use evo_gates::{Case, Evaluation, Status};
use evo_genome::{Dtype, Genome, HeadDim, Problem, Target};
use rayon::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Compiles batches for the worker; shared between threads.
pub struct BatchCompiler {
    pub(crate) plan: GpuPlan,
    pub(crate) toolchain: Toolchain,
    pub(crate) device: String,
    pub(crate) target: Target,
    /// Candidates prepared so far (the fault drill picks every n-th).
    pub(crate) prepared: AtomicUsize,
    /// The compile threads (see [`BatchCompiler::new`]).
    pool: rayon::ThreadPool,
    /// Compiled variants kept across runs; none: every variant is compiled.
    pub(crate) cache: Option<Arc<CubinCache>>,
    /// What NVRTC cost over the run, shared with the late compiles.
    pub(crate) tally: Arc<CompileTally>,
}

/// Compile threads by default: with one GPU, one for every core this process may use
/// but one; with several, half the cores but one. Each GPU's worker checks outputs and
/// launches kernels between compiles, and a worker starved of its core starves its GPU:
/// on a host of two GPUs and 32 logical cores, 30 compile threads slowed each worker's
/// answer from 0.143 s (one GPU) to 0.177 s, and 15 brought it back to 0.156 s, with
/// 589 evaluations a minute instead of 509 (experiments/2026-11-26-h100x2-steady, runs
/// S3 and S4). One GPU keeps up with far fewer compile threads than it is given.
pub fn default_compile_threads(cores: usize, gpus: usize) -> usize {
    if gpus <= 1 {
        cores.saturating_sub(1).max(1)
    } else {
        (cores / 2).saturating_sub(1).max(1)
    }
}

impl BatchCompiler {
    /// A compiler with the plan's compile threads, by default [`default_compile_threads`].
    pub fn new(
        plan: GpuPlan,
        toolchain: Toolchain,
        device: String,
        target: Target,
        gpus: usize,
        cache: Option<Arc<CubinCache>>,
    ) -> BatchCompiler {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = plan
            .compile_threads
            .unwrap_or_else(|| default_compile_threads(cores, gpus));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("evo-compile-{i}"))
            .start_handler(|_| yield_to_workers())
            .build()
            .expect("the compile threads start");
        BatchCompiler {
            plan,
            toolchain,
            device,
            target,
            prepared: AtomicUsize::new(0),
            pool,
            cache,
            tally: Arc::new(CompileTally::new()),
        }
    }

    /// How many compiles run at once.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `work` on the compile threads, waiting for it; parallel iterators inside
    /// it share them.
    pub(crate) fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.pool.install(work)
    }

    /// Starts `work` on the compile threads, after the work started before it.
    pub(crate) fn spawn(&self, work: impl FnOnce() + Send + 'static) {
        self.pool.spawn(work)
    }

    /// The variants every candidate is compiled at: the screen's and the objective's;
    /// the full gate's others are compiled only for a candidate about to be crowned
    /// (`LateCompiler`).
    pub(crate) fn variants(&self) -> Vec<(HeadDim, Dtype)> {
        let mut problems: Vec<Problem> = self.plan.green_cases.iter().map(|c| c.problem).collect();
        problems.extend(&self.plan.objective);
        variants_for(&problems)
    }

    /// Compiles a batch in parallel and writes the CUBINs for the worker. Needs only
    /// `&self`, so the next batch can compile while the worker runs this one.
    pub fn compile_batch(&self, batch: &[Genome]) -> Vec<Prepared> {
        self.install(|| batch.par_iter().map(|g| self.compile_one(g)).collect())
    }

    /// Compiles one candidate (its variants in parallel, each taken from the CUBIN
    /// cache when it holds it) and writes its CUBINs for the worker.
    pub fn compile_one(&self, genome: &Genome) -> Prepared {
        let source = KernelSource::Genome {
            name: genome.id().to_string(),
            genome: *genome,
        };
        let variants = self.variants();
        let start = std::time::Instant::now();
        let mut built = self.install(|| {
            compile_cached(
                &self.toolchain,
                self.cache.as_deref(),
                &source,
                &variants,
                self.target,
            )
        });
        self.tally.add(&built);
        tracing::debug!(
            variants = variants.len(),
            ms = start.elapsed().as_secs_f64() * 1e3,
            "compiled a candidate"
        );
        if let Some(plant) = &self.plan.plant {
            self.plant(plant, &mut built, &variants);
        }
        self.prepare(&source, &built)
    }

    /// The fault drill: swaps the compiled variants of every `every`-th candidate for
    /// a planted kernel's, so the worker runs the planted one under the candidate's id.
    fn plant(&self, plant: &Plant, built: &mut Vec<BuiltVariant>, variants: &[(HeadDim, Dtype)]) {
        let n = self.prepared.fetch_add(1, Ordering::Relaxed) + 1;
        if plant.every == 0 || !n.is_multiple_of(plant.every) || plant.kernels.is_empty() {
            return;
        }
        let (path, text) = &plant.kernels[(n / plant.every - 1) % plant.kernels.len()];
        let source = KernelSource::File {
            path: format!("planted:{path}"),
            text: text.clone(),
        };
        let planted =
            self.install(|| compile_all(&self.toolchain, &[source], variants, self.target));
        if let Some(planted) = planted.into_iter().next() {
            *built = planted;
        }
    }

    fn prepare(&self, source: &KernelSource, built: &[BuiltVariant]) -> Prepared {
        let genome = *source.genome().expect("the search evaluates genomes");
        let id = genome.id();
        let planted = built
            .iter()
            .find_map(|v| v.result.as_ref().ok())
            .is_some_and(|c| c.name.starts_with("planted:"));
        let mut files = Vec::new();
        let mut resources_fwd = None;
        for v in built {
            match &v.result {
                Ok(compiled) => {
                    let file = match write_variant(
                        &self.plan.cubin_dir,
                        &id.to_string(),
                        v.head_dim,
                        v.dtype,
                        &compiled.cubin,
                    ) {
                        Ok(file) => file,
                        Err(e) => {
                            return Prepared::Done(Evaluation::failed(
                                genome,
                                &self.device,
                                Status::RuntimeFailed,
                                e,
                            ))
                        }
                    };
                    let is_objective = self
                        .plan
                        .objective
                        .first()
                        .is_some_and(|p| (p.head_dim, p.dtype) == (v.head_dim, v.dtype));
                    if is_objective {
                        resources_fwd = resources(compiled, genome.smem(v.head_dim).total());
                    }
                    files.push(file);
                }
                // A variant the genome cannot exist at is skipped, not a failure.
                Err(_) if source.unsupported(v.head_dim, self.target).is_some() => {}
                Err(log) => {
                    remove_files(&files);
                    return Prepared::Done(Evaluation::failed(
                        genome,
                        &self.device,
                        Status::CompileFailed,
                        log.clone(),
                    ));
                }
            }
        }
        let has = |d: HeadDim, t: Dtype| files.iter().any(|f| (f.head_dim, f.dtype) == (d, t));
        if let Some(p) = self
            .plan
            .objective
            .iter()
            .find(|p| !has(p.head_dim, p.dtype))
        {
            let why = genome
                .violations(p.head_dim, self.target)
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            remove_files(&files);
            return Prepared::Done(Evaluation::failed(
                genome,
                &self.device,
                Status::Invalid,
                why,
            ));
        }
        let runnable = |cases: &[Case]| -> Vec<Case> {
            cases
                .iter()
                .filter(|c| has(c.problem.head_dim, c.problem.dtype))
                .cloned()
                .collect()
        };
        let green_cases = runnable(&self.plan.green_cases);
        // The full gate's cases at every head dim the genome can be built for (their
        // variants are compiled when it is about to be crowned).
        let full_gate: Vec<Case> = self
            .plan
            .full_gate
            .iter()
            .filter(|c| {
                source
                    .unsupported(c.problem.head_dim, self.target)
                    .is_none()
            })
            .cloned()
            .collect();
        Prepared::Run(WorkerRequest {
            name: if planted {
                format!("{} (planted kernel of the fault drill)", source.name())
            } else {
                source.name().to_string()
            },
            genome,
            variants: files,
            resources: resources_fwd,
            green_cases,
            objective: self.plan.objective.clone(),
            seed: 0,
            confirm: false,
            full_gate,
        })
    }
}

/// How much a compile thread yields to the workers (the Unix nice value it adds).
const COMPILE_NICENESS: i32 = 10;

/// Lowers the calling compile thread's scheduling priority: a GPU's worker (launching,
/// checking outputs) then takes a core the moment it needs one, however many compiles
/// are running, instead of waiting behind them while its GPU idles. A compile thread
/// loses nothing while a core is free. Where the priority cannot be lowered, the thread
/// runs as it is.
fn yield_to_workers() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority reads no memory of ours; on Linux, PRIO_PROCESS with id 0 is
    // the calling thread.
    unsafe {
        let _ = libc::setpriority(libc::PRIO_PROCESS, 0, COMPILE_NICENESS);
    }
}

/// A compiled candidate waiting for the worker, or one already decided without it.
pub enum Prepared {
    Run(WorkerRequest),
    Done(Evaluation),
}

/// Writes one compiled variant's CUBIN as `DIR/<stem>-d<D>-<dtype>.cubin` for the worker.
pub(crate) fn write_variant(
    dir: &Path,
    stem: &str,
    head_dim: HeadDim,
    dtype: Dtype,
    cubin: &[u8],
) -> Result<VariantFile, String> {
    let path = dir.join(format!("{stem}-d{head_dim}-{dtype}.cubin"));
    std::fs::write(&path, cubin)
        .map_err(|e| format!("{}: cannot write the CUBIN: {e}", path.display()))?;
    Ok(VariantFile {
        head_dim,
        dtype,
        cubin: path,
    })
}

pub(crate) fn remove_files(files: &[VariantFile]) {
    for f in files {
        let _ = std::fs::remove_file(&f.cubin);
    }
}
