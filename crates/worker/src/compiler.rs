//! The batch compiler: candidates compiled in parallel (rayon; NVRTC needs no GPU) and
//! written to disk as CUBINs, each a request for the worker or an evaluation decided
//! without one (invalid, or failed to compile).

use crate::plan::{GpuPlan, Plant};
use crate::protocol::{VariantFile, WorkerRequest};
use evo_codegen::Toolchain;
use evo_gates::compile::{compile_all, resources, variants_for, BuiltVariant, KernelSource};
use evo_gates::{Case, Evaluation, Status};
use evo_genome::{Dtype, Genome, HeadDim, Problem, Target};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Compiles batches for the worker; shared between threads.
pub struct BatchCompiler {
    pub(crate) plan: GpuPlan,
    pub(crate) toolchain: Toolchain,
    pub(crate) device: String,
    pub(crate) target: Target,
    /// Candidates prepared so far (the fault drill picks every n-th).
    pub(crate) prepared: AtomicUsize,
}

impl BatchCompiler {
    /// Compiles a batch in parallel (rayon) and writes the CUBINs for the worker.
    /// Needs only `&self`, so the next batch can compile while the worker runs this one.
    pub fn compile_batch(&self, batch: &[Genome]) -> Vec<Prepared> {
        let sources: Vec<KernelSource> = batch
            .iter()
            .map(|g| KernelSource::Genome {
                name: g.id().to_string(),
                genome: *g,
            })
            .collect();
        // The screen's and the objective's variants; the full gate's others are compiled
        // only for a candidate about to be crowned (`LateCompiler`).
        let mut problems: Vec<Problem> = self.plan.green_cases.iter().map(|c| c.problem).collect();
        problems.extend(&self.plan.objective);
        let variants = variants_for(&problems);
        let start = std::time::Instant::now();
        let mut built = compile_all(&self.toolchain, &sources, &variants, self.target);
        tracing::debug!(
            kernels = sources.len(),
            variants = variants.len(),
            ms = start.elapsed().as_secs_f64() * 1e3,
            "compiled a batch"
        );
        if let Some(plant) = &self.plan.plant {
            self.plant(plant, &mut built, &variants);
        }
        sources
            .iter()
            .zip(built)
            .map(|(source, built)| self.prepare(source, &built))
            .collect()
    }

    /// The fault drill: swaps the compiled variants of every `every`-th candidate for
    /// a planted kernel's, so the worker runs the planted one under the candidate's id.
    fn plant(&self, plant: &Plant, built: &mut [Vec<BuiltVariant>], variants: &[(HeadDim, Dtype)]) {
        for candidate in built.iter_mut() {
            let n = self.prepared.fetch_add(1, Ordering::Relaxed) + 1;
            if plant.every == 0 || !n.is_multiple_of(plant.every) || plant.kernels.is_empty() {
                continue;
            }
            let (path, text) = &plant.kernels[(n / plant.every - 1) % plant.kernels.len()];
            let source = KernelSource::File {
                path: format!("planted:{path}"),
                text: text.clone(),
            };
            let planted = compile_all(&self.toolchain, &[source], variants, self.target);
            if let Some(planted) = planted.into_iter().next() {
                *candidate = planted;
            }
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
