//! [`GpuEvaluator`]: the search's [`Evaluator`] on real GPUs, a batch compiler and a
//! pool of runners, one per GPU; batches for the generational search, a stream of
//! single candidates for the steady-state one.

use crate::ahead::{Ahead, AHEAD};
use crate::child::WorkerCommand;
use crate::compiler::BatchCompiler;
use crate::cubin_cache::CubinCache;
use crate::late::LateCompiler;
use crate::plan::GpuPlan;
use crate::pool::RunnerPool;
use crate::stream::{Stream, QUEUED_PER_GPU};
use crate::usage::GpuUse;
use anyhow::Context;
use evo_codegen::Toolchain;
use evo_gates::Evaluation;
use evo_genome::{Genome, GenomeId, Target};
use evo_mutator::{Evaluator, EvaluatorError};
use rayon::prelude::*;
use std::sync::mpsc;
use std::sync::Arc;

/// The search's evaluator on real GPUs: a compiler and the workers, kept apart so
/// that one batch can compile (`&BatchCompiler`) while another runs (`&mut RunnerPool`).
pub struct GpuEvaluator {
    pub compiler: Arc<BatchCompiler>,
    pub runner: RunnerPool,
    /// Batches compiling in the background since the search announced them
    /// ([`Evaluator::prefetch`]), oldest first: a pipelined search announces batch k + 1
    /// before it asks for batch k, announced one round earlier.
    pub ahead: std::collections::VecDeque<Ahead>,
    /// A steady-state search's candidates on their way ([`Evaluator::submit`]); while
    /// it is open, the runners are in its lanes.
    stream: Option<Stream>,
    /// The GPUs, in the order given.
    gpus: Vec<u32>,
}

impl Drop for GpuEvaluator {
    /// A batch announced but never asked for (the budget ran out) leaves no files.
    fn drop(&mut self) {
        self.close_stream();
        for ahead in self.ahead.drain(..) {
            ahead.discard();
        }
    }
}

impl GpuEvaluator {
    /// Starts a worker to learn the device; fails with the worker's message when
    /// there is no CUDA device (the caller may fall back to replay).
    pub fn start(plan: GpuPlan) -> anyhow::Result<GpuEvaluator> {
        GpuEvaluator::start_on(plan, None)
    }

    /// Starts one worker per GPU of `gpus` (ordinals; `None`: the first GPU, unpinned).
    pub fn start_on(plan: GpuPlan, gpus: Option<&[u32]>) -> anyhow::Result<GpuEvaluator> {
        let (runner, device, target) =
            RunnerPool::start(&WorkerCommand::evo()?, gpus, plan.seed, plan.timeout)?;
        let target = target.with_context(|| {
            format!("{device}: no genome target describes this GPU (sm_89 and sm_90 are known)")
        })?;
        let toolchain = Toolchain::discover()?;
        std::fs::create_dir_all(&plan.cubin_dir)
            .with_context(|| format!("{}: cannot create", plan.cubin_dir.display()))?;
        let cache = match &plan.cubin_cache {
            None => None,
            Some(dir) => Some(Arc::new(CubinCache::open(dir, &toolchain).with_context(
                || {
                    format!(
                        "{}: cannot create the CUBIN cache (choose another folder with --cubin-cache DIR, or none with --cubin-cache off)",
                        dir.display()
                    )
                },
            )?)),
        };
        let mut runner = runner;
        let gpus = runner.runners.len();
        let compiler = BatchCompiler::new(plan, toolchain, device, target, gpus, cache);
        // The late compiles share the compiler's toolchain, cache and tally.
        let late = LateCompiler {
            toolchain: compiler.toolchain.clone(),
            target,
            cubin_dir: compiler.plan.cubin_dir.clone(),
            cache: compiler.cache.clone(),
            tally: compiler.tally.clone(),
        };
        for r in &mut runner.runners {
            r.late = Some(late.clone());
        }
        Ok(GpuEvaluator::new(runner, compiler))
    }

    /// The evaluator of a started pool and its compiler.
    pub(crate) fn new(runner: RunnerPool, compiler: BatchCompiler) -> GpuEvaluator {
        GpuEvaluator {
            gpus: runner.gpus(),
            runner,
            compiler: Arc::new(compiler),
            ahead: Default::default(),
            stream: None,
        }
    }

    /// Ends a steady-state stream: its lanes' runners come back to the pool.
    fn close_stream(&mut self) {
        if let Some(stream) = self.stream.take() {
            self.runner.runners = stream.close();
        }
    }

    pub fn target(&self) -> Target {
        self.compiler.target
    }
}

impl Evaluator for GpuEvaluator {
    fn device(&self) -> String {
        self.compiler.device.clone()
    }

    fn template_hash(&self) -> String {
        evo_codegen::template_hash()
    }

    fn toolchain(&self) -> String {
        self.compiler.toolchain.label()
    }

    fn evaluate(&mut self, batch: &[Genome]) -> Result<Vec<Evaluation>, EvaluatorError> {
        self.evaluate_each(batch, &mut |_| {})
    }

    fn prefetch(&mut self, next: &[Genome]) {
        self.close_stream();
        while self.ahead.len() >= AHEAD {
            if let Some(stale) = self.ahead.pop_front() {
                stale.discard();
            }
        }
        self.ahead
            .push_back(Ahead::start(self.compiler.clone(), next));
    }

    fn evaluate_each(
        &mut self,
        batch: &[Genome],
        done: &mut dyn FnMut(&Evaluation),
    ) -> Result<Vec<Evaluation>, EvaluatorError> {
        self.close_stream();
        let ids: Vec<GenomeId> = batch.iter().map(|g| g.id()).collect();
        // Announced and compiling (or compiled) since then: batches announced before
        // it were not asked for and are dropped; those announced after it stay.
        if let Some(at) = self.ahead.iter().position(|a| a.ids == ids) {
            for stale in self.ahead.drain(..at).collect::<Vec<_>>() {
                stale.discard();
            }
            let Ahead {
                compiled, thread, ..
            } = self.ahead.pop_front().expect("found above");
            let evals = self.runner.run_stream(compiled, batch.len(), done);
            let _ = thread.join();
            return Ok(evals);
        }
        // Every GPU starts on the first candidates compiled while the rest compile, so
        // NVRTC and the GPU work at the same time.
        let compiler = &self.compiler;
        let runner = &mut self.runner;
        let (tx, rx) = mpsc::channel();
        Ok(std::thread::scope(|scope| {
            scope.spawn(move || {
                compiler.install(|| {
                    batch
                        .par_iter()
                        .enumerate()
                        .for_each_with(tx, |tx, (i, genome)| {
                            // The receiver lives until every candidate is answered.
                            let _ = tx.send((i, compiler.compile_one(genome)));
                        })
                });
            });
            runner.run_stream(rx, batch.len(), done)
        }))
    }

    /// Enough candidates that every GPU has [`QUEUED_PER_GPU`] compiled ones queued
    /// behind the one it runs, and the compile threads have a candidate each to work
    /// on (its variants compile in parallel) to keep that queue filled.
    fn in_flight(&self) -> usize {
        let variants = self.compiler.variants().len().max(1);
        self.gpus.len() * (QUEUED_PER_GPU + 1) + self.compiler.threads().div_ceil(variants)
    }

    fn submit(&mut self, genome: &Genome) -> Result<(), EvaluatorError> {
        let runners = &mut self.runner.runners;
        self.stream
            .get_or_insert_with(|| Stream::open(std::mem::take(runners)))
            .submit(&self.compiler, *genome);
        Ok(())
    }

    fn next_answer(&mut self, _waiting: &[Genome]) -> Result<Evaluation, EvaluatorError> {
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| EvaluatorError::new("asked for an answer with nothing submitted"))?;
        let answer = stream.next().ok_or_else(|| {
            EvaluatorError::new(format!(
                "the GPU lanes ended with {} candidates unanswered",
                stream.waiting()
            ))
        })?;
        // Nothing left on its way: the runners come back, so the pool's time is read.
        if stream.waiting() == 0 {
            self.close_stream();
        }
        Ok(answer)
    }

    fn utilization(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.runner.usage().iter().map(GpuUse::line).collect();
        lines.extend(self.compiler.tally.line(self.compiler.threads()));
        lines.extend(self.compiler.cache.as_ref().map(|c| c.line()));
        lines
    }

    fn describe(&self) -> String {
        let workers = match self.gpus.as_slice() {
            [_] => "a child worker".to_string(),
            many => format!(
                "{} child workers, one per GPU ({})",
                many.len(),
                many.iter()
                    .map(|g| g.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        let cache = match &self.compiler.cache {
            Some(c) => format!("CUBIN cache {}", c.dir().display()),
            None => "no CUBIN cache".into(),
        };
        format!(
            "evaluating on {} ({}), {} GREEN cases, objective {}; kernels run in {workers} \
             (timeout {:.0} s), compiled on {} threads ({cache})",
            self.compiler.device,
            self.compiler.target,
            self.compiler.plan.green_cases.len(),
            self.compiler
                .plan
                .objective
                .iter()
                .map(|p| p.label())
                .collect::<Vec<_>>()
                .join(" + "),
            self.compiler.plan.timeout.as_secs_f64(),
            self.compiler.threads()
        )
    }
}
