//! The GPU backend of the search: parallel compiles here, gates in a child worker.
//!
//! A candidate kernel may fault (illegal address), hang, or leave the CUDA context
//! unusable. None of that may end a search, so this process never touches CUDA: it
//! compiles a generation in parallel (rayon, NVRTC needs no GPU), writes the CUBINs
//! to disk, and hands them one at a time to `evo worker`, a child process that owns
//! the context and answers with an [`Evaluation`] per JSON line. A child that dies
//! is recorded as `runtime_failed`, one that does not answer within the timeout is
//! killed and recorded as `timeout`; either way a fresh child takes over.
//!
//! With several GPUs (`--gpus`), one worker runs per GPU, each pinned to its device
//! through `CUDA_VISIBLE_DEVICES` and replaced on that same device when it dies; the
//! candidates of a batch go to whichever worker is free. All GPUs must be one model,
//! or their timings would not compare.

use anyhow::{bail, Context};
use evo_codegen::Toolchain;
use evo_gates::compile::{compile_all, resources, variants_for, BuiltVariant, KernelSource};
use evo_gates::{Case, Evaluation, Resources, Status};
use evo_genome::{Dtype, Genome, GenomeId, HeadDim, Problem, Target};
use evo_mutator::{Evaluator, EvaluatorError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The first line a worker writes: which device it holds, or why it holds none.
#[derive(Debug, Serialize, Deserialize)]
pub enum Hello {
    Ready {
        device: String,
        target: Option<Target>,
    },
    NoDevice {
        message: String,
    },
}

/// One compiled variant of a candidate, as the worker loads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantFile {
    pub head_dim: HeadDim,
    pub dtype: Dtype,
    pub cubin: PathBuf,
}

/// One candidate for the worker: what to load, what to check, what to time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    pub name: String,
    pub genome: Genome,
    pub variants: Vec<VariantFile>,
    pub resources: Option<Resources>,
    pub green_cases: Vec<Case>,
    pub objective: Vec<Problem>,
    pub seed: u64,
    /// Time with the longer confirmation settings (a candidate about to be crowned).
    #[serde(default)]
    pub confirm: bool,
    /// The full gate's GREEN cases (fixed and drawn from the run seed), run instead of
    /// `green_cases` when the candidate is about to be crowned.
    #[serde(default)]
    pub full_gate: Vec<Case>,
}

/// Input seeds rotate over this many values: consecutive candidates see different
/// inputs, while the worker computes each seed's CPU references only once. Within one
/// check every case still runs twice, on two different input sets, into a freshly
/// poisoned output.
pub const SEED_POOL: u64 = 4;

/// What the search measures and how.
#[derive(Debug, Clone)]
pub struct GpuPlan {
    /// GREEN's cases; those a genome cannot be built for (a resource rule at that head
    /// dim) are skipped for that genome and named in its record.
    pub green_cases: Vec<Case>,
    /// The full gate a new best must pass before it is crowned (the fixed cases and
    /// the shapes drawn from `seed`); empty: the screen is the only gate.
    pub full_gate: Vec<Case>,
    /// The shapes FAST times; the score is their geometric mean.
    pub objective: Vec<Problem>,
    /// Base of every input seed; candidate n of the run uses `seed + n`.
    pub seed: u64,
    /// Longest a worker may take over one candidate.
    pub timeout: Duration,
    /// Where CUBINs are written for the worker.
    pub cubin_dir: PathBuf,
    /// The fault drill: replace some candidates' kernels with planted faulting or
    /// hanging ones (None in every real search).
    pub plant: Option<Plant>,
}

/// The fault drill: every `every`-th candidate sent to the worker runs one of the
/// planted kernels (in turn) instead of its own, to prove that a kernel which faults
/// or hangs costs only its own evaluation. Records of planted candidates say so.
#[derive(Debug, Clone)]
pub struct Plant {
    pub every: usize,
    /// Hand-written ABI kernels (tests/faults/*.cu): (path, source text).
    pub kernels: Vec<(String, String)>,
}

/// How to start a worker: `evo worker` normally, a stand-in in the tests.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Extra environment, e.g. the `CUDA_VISIBLE_DEVICES` that pins it to one GPU.
    pub env: Vec<(String, String)>,
}

impl WorkerCommand {
    /// This very binary, `evo worker`.
    pub fn evo() -> anyhow::Result<WorkerCommand> {
        Ok(WorkerCommand {
            program: std::env::current_exe()
                .context("cannot locate the evo binary for the worker")?,
            args: vec!["worker".into()],
            env: Vec::new(),
        })
    }

    /// The same command, shown only GPU `ordinal` of the GPUs this process sees.
    fn pinned(&self, ordinal: u32) -> anyhow::Result<WorkerCommand> {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let mut pinned = self.clone();
        pinned.env.push((
            "CUDA_VISIBLE_DEVICES".into(),
            pin(visible.as_deref(), ordinal)?,
        ));
        Ok(pinned)
    }
}

/// The `CUDA_VISIBLE_DEVICES` value for GPU `ordinal` of this process's GPUs: under a
/// scheduler that already narrowed them (`visible`, e.g. Slurm's `2,5`), the ordinal
/// counts within that list.
fn pin(visible: Option<&str>, ordinal: u32) -> anyhow::Result<String> {
    match visible.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(ordinal.to_string()),
        Some(list) => {
            let ids: Vec<&str> = list.split(',').map(str::trim).collect();
            ids.get(ordinal as usize)
                .map(|id| id.to_string())
                .with_context(|| {
                    format!(
                        "--gpus asks for GPU {ordinal}, but CUDA_VISIBLE_DEVICES={list} shows {} GPU(s), numbered from 0",
                        ids.len()
                    )
                })
        }
    }
}

/// The GPUs of `--gpus`: `all`, or ordinals such as `0,1`.
pub fn parse_gpus(spec: &str) -> anyhow::Result<Vec<u32>> {
    if spec.trim() == "all" {
        let count = match std::env::var("CUDA_VISIBLE_DEVICES") {
            Ok(list) if !list.trim().is_empty() => list.split(',').count(),
            _ => std::fs::read_dir("/proc/driver/nvidia/gpus").map_or(0, |d| d.count()),
        };
        if count == 0 {
            bail!("--gpus all: the NVIDIA driver reports no GPU on this machine");
        }
        return Ok((0..count as u32).collect());
    }
    let mut gpus = Vec::new();
    for part in spec.split(',') {
        let ordinal: u32 = part.trim().parse().with_context(|| {
            format!("--gpus {spec}: `{part}` is not a GPU ordinal; use `all` or a list such as 0,1")
        })?;
        if gpus.contains(&ordinal) {
            bail!("--gpus {spec}: GPU {ordinal} is named twice");
        }
        gpus.push(ordinal);
    }
    Ok(gpus)
}

/// Refuses GPUs of more than one model (`(ordinal, device name)`): the timings of a
/// `what` (a search, a gate) on two models would not compare.
pub fn require_one_model(what: &str, models: &[(u32, String)]) -> anyhow::Result<()> {
    if models.iter().any(|(_, m)| *m != models[0].1) {
        let list = models
            .iter()
            .map(|(g, m)| format!("GPU {g}: {m}"))
            .collect::<Vec<_>>()
            .join(", ");
        bail!(
            "one {what} runs on one GPU model, or its timings would not compare ({list}); pick GPUs of one model with --gpus"
        );
    }
    Ok(())
}

/// A running `evo worker` child and the channel its stdout lines arrive on.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Worker {
    fn spawn(command: &WorkerCommand) -> anyhow::Result<(Worker, Hello)> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start the worker {}", command.program.display()))?;
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin,
            lines,
        };
        let hello = match worker.lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => serde_json::from_str::<Hello>(&line)
                .with_context(|| format!("worker greeted with an unreadable line: {line}"))?,
            Err(_) => {
                worker.kill();
                bail!("`evo worker` exited or stalled before saying which device it holds")
            }
        };
        Ok((worker, hello))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The search's evaluator on real GPUs: a compiler and the workers, kept apart so
/// that one batch can compile (`&BatchCompiler`) while another runs (`&mut RunnerPool`).
pub struct GpuEvaluator {
    pub compiler: Arc<BatchCompiler>,
    pub runner: RunnerPool,
    /// Batches compiling in the background since the search announced them
    /// ([`Evaluator::prefetch`]), oldest first: a pipelined search announces batch k + 1
    /// before it asks for batch k, announced one round earlier.
    pub ahead: std::collections::VecDeque<Ahead>,
}

/// Announced batches kept at most: the one about to be asked for and the one after it.
const AHEAD: usize = 2;

/// A batch compiling ahead of its turn: its genomes and their compiled candidates as
/// they come (index in the batch, candidate).
pub struct Ahead {
    ids: Vec<GenomeId>,
    compiled: Receiver<(usize, Prepared)>,
    thread: std::thread::JoinHandle<()>,
}

impl Ahead {
    /// Starts compiling `batch` on the compile threads, each candidate sent as soon as
    /// it is compiled.
    fn start(compiler: Arc<BatchCompiler>, batch: &[Genome]) -> Ahead {
        let (tx, compiled) = mpsc::channel();
        let genomes = batch.to_vec();
        let thread = std::thread::spawn(move || {
            genomes
                .par_iter()
                .enumerate()
                .for_each_with(tx, |tx, (i, genome)| {
                    let prepared = compiler.compile_batch(std::slice::from_ref(genome));
                    let prepared = prepared.into_iter().next().expect("one genome in, one out");
                    // The receiver lives until this thread is joined.
                    let _ = tx.send((i, prepared));
                });
        });
        Ahead {
            ids: batch.iter().map(|g| g.id()).collect(),
            compiled,
            thread,
        }
    }

    /// A batch that will not be asked for: waits for its compiles, removes their files.
    fn discard(self) {
        let Ahead {
            compiled, thread, ..
        } = self;
        let _ = thread.join();
        for (_, p) in compiled.try_iter() {
            if let Prepared::Run(request) = p {
                remove_files(&request.variants);
            }
        }
    }
}

impl Drop for GpuEvaluator {
    /// A batch announced but never asked for (the budget ran out) leaves no files.
    fn drop(&mut self) {
        for ahead in self.ahead.drain(..) {
            ahead.discard();
        }
    }
}

/// Compiles batches for the worker; shared between threads.
pub struct BatchCompiler {
    plan: GpuPlan,
    toolchain: Toolchain,
    device: String,
    target: Target,
    /// Candidates prepared so far (the fault drill picks every n-th).
    prepared: AtomicUsize,
}

/// Feeds prepared candidates to the worker child, replacing it when it dies or hangs.
pub struct Runner {
    /// The GPU its worker is pinned to (recorded on its evaluations).
    gpu: u32,
    command: WorkerCommand,
    device: String,
    seed: u64,
    timeout: Duration,
    worker: Option<Worker>,
    evaluated: u64,
    /// The best score this runner has confirmed; a candidate that beats it is re-timed.
    best_us: Option<f64>,
    /// Compiles the variants only the full gate needs, for a candidate about to be
    /// crowned (the screen compiles only its own and the objective's).
    late: Option<LateCompiler>,
    /// Where this runner's time went (see [`GpuUse`]).
    usage: GpuUse,
}

/// Where one GPU's time went during a run: from its first request to its last answer,
/// how long its worker was answering (GREEN, FAST, a confirmation: GPU work and the
/// checks between launches) and how long it waited while the full gate's variants of a
/// new best compiled; the rest it waited for compiled candidates (the start of each
/// generation, or compiling slower than the GPU).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuUse {
    pub gpu: u32,
    pub answers: u64,
    pub busy: Duration,
    pub late_compile: Duration,
    pub span: Duration,
    first: Option<std::time::Instant>,
}

impl GpuUse {
    fn asked(&mut self, at: std::time::Instant, answered: std::time::Instant) {
        let first = *self.first.get_or_insert(at);
        self.busy += answered - at;
        self.span = answered - first;
        self.answers += 1;
    }

    /// The time it waited for compiled candidates.
    pub fn waiting(&self) -> Duration {
        self.span.saturating_sub(self.busy + self.late_compile)
    }

    /// `GPU 0: worker busy 42.0 s of 72.0 s (58%); waited 22.7 s for compiled candidates, 7.3 s for new bests' full-gate compiles`.
    pub fn line(&self) -> String {
        let span = self.span.as_secs_f64();
        format!(
            "GPU {}: worker busy {:.1} s of {:.1} s ({:.0}%, {} answers); waited {:.1} s for compiled candidates, {:.1} s for new bests' full-gate compiles",
            self.gpu,
            self.busy.as_secs_f64(),
            span,
            if span > 0.0 {
                100.0 * self.busy.as_secs_f64() / span
            } else {
                0.0
            },
            self.answers,
            self.waiting().as_secs_f64(),
            self.late_compile.as_secs_f64()
        )
    }
}

/// Compiles the full gate's remaining variants of one candidate, when it is about to
/// be crowned: most candidates never get there, so compiling them for every candidate
/// would double the compile work of a search for nothing.
#[derive(Clone)]
pub struct LateCompiler {
    toolchain: Toolchain,
    target: Target,
    cubin_dir: PathBuf,
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
        let built = compile_all(&self.toolchain, &[source], &missing, self.target);
        let mut files = Vec::new();
        for v in built.into_iter().flatten() {
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
        let mut runner = runner;
        let late = LateCompiler {
            toolchain: toolchain.clone(),
            target,
            cubin_dir: plan.cubin_dir.clone(),
        };
        for r in &mut runner.runners {
            r.late = Some(late.clone());
        }
        Ok(GpuEvaluator {
            runner,
            ahead: Default::default(),
            compiler: Arc::new(BatchCompiler {
                plan,
                toolchain,
                device,
                target,
                prepared: AtomicUsize::new(0),
            }),
        })
    }

    pub fn target(&self) -> Target {
        self.compiler.target
    }
}

impl Runner {
    fn beats_best(&self, us: f64) -> bool {
        self.best_us.is_none_or(|best| us < best)
    }

    /// A new best passes the full gate before it is crowned: the full GREEN (fixed and
    /// drawn cases) and a verified FAST re-timed alone, with more repeats and a longer
    /// warm-up, on new inputs; the confirmed figure is the one recorded.
    fn confirm(&mut self, request: WorkerRequest, first_us: f64) -> Evaluation {
        let compiling = std::time::Instant::now();
        let compiled = late_compile(self.late.clone(), request);
        if self.late.is_some() {
            self.usage.late_compile += compiling.elapsed();
        }
        self.confirm_compiled(compiled, first_us)
    }

    /// The confirmation once its full-gate variants are compiled ([`late_compile`]).
    fn confirm_compiled(&mut self, compiled: LateCompiled, first_us: f64) -> Evaluation {
        let LateCompiled { mut request, files } = compiled;
        let late_files = match files {
            Ok(files) => files,
            Err(log) => {
                return Evaluation {
                    resources: request.resources,
                    ..Evaluation::failed(
                        request.genome,
                        &self.device,
                        Status::CompileFailed,
                        format!(
                            "passed the screen ({first_us:.2} µs) but cannot take the full gate: {log}"
                        ),
                    )
                };
            }
        };
        if !request.full_gate.is_empty() {
            request.green_cases = std::mem::take(&mut request.full_gate);
        }
        request.seed = self.seed.wrapping_add(self.evaluated % SEED_POOL);
        self.evaluated += 1;
        let mut again = self.ask(&request);
        remove_files(&late_files);
        match again.score_us {
            Some(us) if again.is_ok() => {
                if self.beats_best(us) {
                    self.best_us = Some(us);
                }
                let note = format!(
                    "new best re-timed before crowning: first {first_us:.2} µs, confirmed {us:.2} µs"
                );
                again.detail = if again.detail.is_empty() {
                    note
                } else {
                    format!("{note}; {}", again.detail)
                };
                again
            }
            // The confirmation failed where the first run passed: that failure stands.
            _ => {
                again.detail = format!(
                    "passed first ({first_us:.2} µs) but failed its confirmation run: {}",
                    again.detail
                );
                again
            }
        }
    }

    /// Sends one request and waits for its answer; replaces a dead or hung worker.
    fn ask(&mut self, request: &WorkerRequest) -> Evaluation {
        let genome = request.genome;
        let failed = |status, detail: String| Evaluation {
            resources: request.resources,
            ..Evaluation::failed(genome, &self.device, status, detail)
        };
        if self.worker.is_none() {
            match Worker::spawn(&self.command) {
                Ok((w, Hello::Ready { .. })) => self.worker = Some(w),
                Ok((_, Hello::NoDevice { message })) => {
                    return failed(
                        Status::RuntimeFailed,
                        format!("replacement worker has no device: {message}"),
                    )
                }
                Err(e) => {
                    return failed(
                        Status::RuntimeFailed,
                        format!("cannot start a replacement worker: {e:#}"),
                    )
                }
            }
        }
        let worker = self.worker.as_mut().expect("a worker was just ensured");
        let line = serde_json::to_string(request).expect("requests always serialize");
        if writeln!(worker.stdin, "{line}")
            .and_then(|_| worker.stdin.flush())
            .is_err()
        {
            self.worker = None;
            return failed(
                Status::RuntimeFailed,
                "the worker died before taking the candidate".into(),
            );
        }
        let start = std::time::Instant::now();
        let answer = worker.lines.recv_timeout(self.timeout);
        self.usage.asked(start, std::time::Instant::now());
        tracing::debug!(
            candidate = request.name,
            ms = start.elapsed().as_secs_f64() * 1e3,
            "worker answered"
        );
        match answer {
            Ok(answer) => match serde_json::from_str::<Evaluation>(&answer) {
                Ok(eval) => {
                    // A runtime failure may leave the context unusable: the worker
                    // exits after answering, so start afresh next time.
                    if eval.status == Status::RuntimeFailed {
                        self.worker = None;
                    }
                    eval
                }
                Err(e) => {
                    self.worker = None;
                    failed(
                        Status::RuntimeFailed,
                        format!("the worker answered an unreadable line ({e}): {answer}"),
                    )
                }
            },
            Err(RecvTimeoutError::Timeout) => {
                self.worker = None; // dropping kills it
                failed(
                    Status::Timeout,
                    format!(
                        "no answer within {:.0} s while running {}: the kernel hung (worker killed)",
                        self.timeout.as_secs_f64(),
                        request.name
                    ),
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                let code = self
                    .worker
                    .take()
                    .and_then(|mut w| w.child.wait().ok())
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "unknown status".into());
                failed(
                    Status::RuntimeFailed,
                    format!("the worker died while running {} ({code})", request.name),
                )
            }
        }
    }

    /// The screen of one candidate: its seed from the pool, then its answer.
    fn screen(&mut self, request: &mut WorkerRequest) -> Evaluation {
        request.seed = self.seed.wrapping_add(self.evaluated % SEED_POOL);
        self.evaluated += 1;
        self.ask(request)
    }

    /// A candidate's last evaluation: its screen's CUBINs removed, its GPU recorded.
    fn settle(&self, mut eval: Evaluation, screening: &[VariantFile]) -> Evaluation {
        remove_files(screening);
        eval.device_index = Some(self.gpu);
        eval
    }

    /// Runs prepared candidates through the worker, one at a time, in order, handing
    /// each evaluation to `done` as soon as it exists.
    pub fn run_prepared(
        &mut self,
        prepared: Vec<Prepared>,
        done: &mut dyn FnMut(&Evaluation),
    ) -> Vec<Evaluation> {
        prepared
            .into_iter()
            .map(|p| match p {
                Prepared::Done(eval) => eval,
                Prepared::Run(mut request) => {
                    let mut eval = self.screen(&mut request);
                    if let Some(first) = eval.score_us.filter(|&us| self.beats_best(us)) {
                        eval = self.confirm(request.clone(), first);
                    }
                    self.settle(eval, &request.variants)
                }
            })
            .inspect(|eval| done(eval))
            .collect()
    }
}

/// A new best's request with the full gate's variants added (or why they did not
/// compile), ready for its confirmation run.
struct LateCompiled {
    request: WorkerRequest,
    files: Result<Vec<VariantFile>, String>,
}

/// Compiles what a new best's full gate needs beyond its screen (nothing without a
/// late compiler); may run on a thread of its own while the GPU goes on.
fn late_compile(late: Option<LateCompiler>, mut request: WorkerRequest) -> LateCompiled {
    request.confirm = true;
    let files = match late {
        None => Ok(Vec::new()),
        Some(l) => l.complete(&mut request),
    };
    LateCompiled { request, files }
}

/// A new best waiting for its full-gate compile, in a runner's stream.
struct Confirming {
    index: usize,
    first_us: f64,
    /// The screen's CUBINs, removed once the confirmation has run.
    screening: Vec<VariantFile>,
    compile: std::thread::JoinHandle<LateCompiled>,
}

impl Runner {
    /// One runner's share of a stream: candidates as they arrive, each new best's
    /// full-gate variants compiled on a thread of their own while this GPU goes on with
    /// the next candidates, its confirmation run as soon as they are ready (so the GPU
    /// does not wait for that compile unless it has nothing else to do). A candidate
    /// screened meanwhile is confirmed when it beats the confirmed best, as always: it
    /// may be one the pending confirmation would have made unnecessary, never one it
    /// leaves unconfirmed. Before any best is confirmed, confirmations run in turn.
    fn run_stream_lane(
        &mut self,
        source: &Mutex<Receiver<(usize, Prepared)>>,
        results: &mpsc::Sender<(usize, Evaluation)>,
    ) {
        let mut confirming: std::collections::VecDeque<Confirming> = Default::default();
        let mut open = true;
        loop {
            while confirming
                .front()
                .is_some_and(|c| c.compile.is_finished() || !open)
            {
                let c = confirming.pop_front().expect("checked above");
                let waited = std::time::Instant::now();
                let compiled = c.compile.join().expect("a late compile does not panic");
                if !open {
                    self.usage.late_compile += waited.elapsed();
                }
                let eval = self.confirm_compiled(compiled, c.first_us);
                let eval = self.settle(eval, &c.screening);
                if results.send((c.index, eval)).is_err() {
                    return;
                }
            }
            if !open {
                return;
            }
            let next = {
                let source = source.lock().expect("no thread panics holding it");
                if confirming.is_empty() {
                    source.recv().map_err(|_| RecvTimeoutError::Disconnected)
                } else {
                    let waited = std::time::Instant::now();
                    let next = source.recv_timeout(Duration::from_millis(10));
                    if next.is_err() {
                        self.usage.late_compile += waited.elapsed();
                    }
                    next
                }
            };
            let (index, prepared) = match next {
                Ok(item) => item,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    continue;
                }
            };
            let eval = match prepared {
                Prepared::Done(eval) => eval,
                Prepared::Run(mut request) => {
                    let eval = self.screen(&mut request);
                    match eval.score_us.filter(|&us| self.beats_best(us)) {
                        // No confirmed best yet: every candidate would beat it until the
                        // first confirmation is in, so that one runs before the next.
                        Some(first_us) if self.best_us.is_none() => {
                            let eval = self.confirm(request.clone(), first_us);
                            self.settle(eval, &request.variants)
                        }
                        Some(first_us) => {
                            let late = self.late.clone();
                            let screening = request.variants.clone();
                            confirming.push_back(Confirming {
                                index,
                                first_us,
                                screening,
                                compile: std::thread::spawn(move || late_compile(late, request)),
                            });
                            continue;
                        }
                        None => self.settle(eval, &request.variants),
                    }
                }
            };
            if results.send((index, eval)).is_err() {
                return;
            }
        }
    }
}

/// One [`Runner`] per GPU; a batch's candidates go to whichever is free.
pub struct RunnerPool {
    runners: Vec<Runner>,
}

impl RunnerPool {
    /// Starts a worker on each GPU (`None`: one worker on the first GPU, unpinned) and
    /// checks that they are one model: returns the pool, the model and its target.
    fn start(
        command: &WorkerCommand,
        gpus: Option<&[u32]>,
        seed: u64,
        timeout: Duration,
    ) -> anyhow::Result<(RunnerPool, String, Option<Target>)> {
        let lanes: Vec<(u32, WorkerCommand)> = match gpus {
            None => vec![(0, command.clone())],
            Some([]) => bail!("--gpus names no GPU"),
            Some(gpus) => gpus
                .iter()
                .map(|&g| Ok((g, command.pinned(g)?)))
                .collect::<anyhow::Result<_>>()?,
        };
        let mut runners = Vec::new();
        let mut models: Vec<(u32, String, Option<Target>)> = Vec::new();
        for (gpu, command) in lanes {
            let (worker, hello) = Worker::spawn(&command)?;
            let (device, target) = match hello {
                Hello::Ready { device, target } => (device, target),
                Hello::NoDevice { message } if gpus.is_some() => bail!("GPU {gpu}: {message}"),
                Hello::NoDevice { message } => bail!("{message}"),
            };
            models.push((gpu, device.clone(), target));
            runners.push(Runner {
                gpu,
                command,
                device,
                seed,
                timeout,
                worker: Some(worker),
                evaluated: 0,
                best_us: None,
                late: None,
                usage: GpuUse {
                    gpu,
                    ..GpuUse::default()
                },
            });
        }
        let (_, device, target) = models[0].clone();
        let names: Vec<(u32, String)> = models.into_iter().map(|(g, d, _)| (g, d)).collect();
        require_one_model("search", &names)?;
        Ok((RunnerPool { runners }, device, target))
    }

    /// The GPUs, in the order given.
    pub fn gpus(&self) -> Vec<u32> {
        self.runners.iter().map(|r| r.gpu).collect()
    }

    /// Where each GPU's time went so far.
    pub fn usage(&self) -> Vec<GpuUse> {
        self.runners.iter().map(|r| r.usage).collect()
    }

    /// Runs prepared candidates on every GPU at once, handing each evaluation to `done`
    /// as soon as it exists (in the order they finish); returns them in batch order.
    pub fn run_prepared(
        &mut self,
        prepared: Vec<Prepared>,
        done: &mut dyn FnMut(&Evaluation),
    ) -> Vec<Evaluation> {
        if let [one] = self.runners.as_mut_slice() {
            return one.run_prepared(prepared, done);
        }
        let n = prepared.len();
        let (tx, rx) = mpsc::channel();
        for item in prepared.into_iter().enumerate() {
            tx.send(item).expect("the receiver is alive");
        }
        drop(tx);
        self.run_stream(rx, n, done)
    }

    /// Runs `n` candidates `(index in the batch, prepared)` as they arrive on `source`,
    /// each on the first free GPU; returns them in batch order.
    fn run_stream(
        &mut self,
        source: Receiver<(usize, Prepared)>,
        n: usize,
        done: &mut dyn FnMut(&Evaluation),
    ) -> Vec<Evaluation> {
        let mut results: Vec<Option<Evaluation>> = (0..n).map(|_| None).collect();
        let source = Mutex::new(source);
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|scope| {
            for runner in &mut self.runners {
                let tx = tx.clone();
                let source = &source;
                scope.spawn(move || runner.run_stream_lane(source, &tx));
            }
            drop(tx);
            for (i, eval) in rx {
                done(&eval);
                results[i] = Some(eval);
            }
        });
        // A new best on one GPU is the bar for all: none re-times a slower one.
        let best = self
            .runners
            .iter()
            .filter_map(|r| r.best_us)
            .min_by(f64::total_cmp);
        for r in &mut self.runners {
            r.best_us = best;
        }
        results
            .into_iter()
            .map(|e| e.expect("every candidate was answered"))
            .collect()
    }
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
fn write_variant(
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

fn remove_files(files: &[VariantFile]) {
    for f in files {
        let _ = std::fs::remove_file(&f.cubin);
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
                batch
                    .par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, genome)| {
                        let prepared = compiler.compile_batch(std::slice::from_ref(genome));
                        let prepared = prepared.into_iter().next().expect("one genome in, one out");
                        // The receiver lives until every candidate is answered.
                        let _ = tx.send((i, prepared));
                    });
            });
            runner.run_stream(rx, batch.len(), done)
        }))
    }

    fn utilization(&self) -> Vec<String> {
        self.runner.usage().iter().map(GpuUse::line).collect()
    }

    fn describe(&self) -> String {
        let gpus = self.runner.gpus();
        let workers = match gpus.as_slice() {
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
        format!(
            "evaluating on {} ({}), {} GREEN cases, objective {}; kernels run in {workers} \
             (timeout {:.0} s)",
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
            self.runner.runners[0].timeout.as_secs_f64()
        )
    }
}

/// The worker's side: hold the device, answer one request per line until stdin closes.
pub fn serve(stdin: impl BufRead, mut stdout: impl Write) -> anyhow::Result<()> {
    use evo_gates::{EvalOptions, FastOptions};
    // The device with the gates' verifier, which checks the timed launches.
    let opened = evo_gates::Device::open(0)
        .map_err(|e| e.to_string())
        .and_then(|device| {
            let tc = Toolchain::discover().map_err(|e| e.to_string())?;
            evo_gates::compile::install_verifier(&tc, &device).map_err(|e| e.to_string())?;
            Ok(device)
        });
    let device = match opened {
        Ok(d) => d,
        Err(message) => {
            let hello = Hello::NoDevice { message };
            writeln!(stdout, "{}", serde_json::to_string(&hello)?)?;
            return Ok(());
        }
    };
    let hello = Hello::Ready {
        device: device.name().to_string(),
        target: device.target(),
    };
    // GREEN's inputs and CPU references, computed once per seed of the pool (see
    // `SEED_POOL`) and reused by every later candidate that draws the same seed.
    let mut references = evo_gates::green::GreenCache::default();
    writeln!(stdout, "{}", serde_json::to_string(&hello)?)?;
    stdout.flush()?;
    for line in stdin.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let request: WorkerRequest = serde_json::from_str(&line)
            .with_context(|| format!("unreadable worker request: {line}"))?;
        let fast = if request.confirm {
            // A confirmation re-times on freshly allocated and uploaded buffers.
            device.drop_spare_buffers();
            FastOptions::default().confirmation()
        } else {
            FastOptions::default()
        };
        let eval = serve_one(
            &device,
            &request,
            &EvalOptions {
                seed: request.seed,
                fast,
            },
            &mut references,
        );
        writeln!(stdout, "{}", serde_json::to_string(&eval)?)?;
        stdout.flush()?;
        if eval.status == Status::RuntimeFailed {
            // The context may be poisoned (a sticky fault): let the parent start afresh.
            return Ok(());
        }
    }
    Ok(())
}

fn serve_one(
    device: &evo_gates::Device,
    request: &WorkerRequest,
    options: &evo_gates::EvalOptions,
    references: &mut evo_gates::green::GreenCache,
) -> Evaluation {
    let mut family = evo_gates::KernelFamily::new(&request.name);
    for v in &request.variants {
        let loaded = read_cubin(&v.cubin).and_then(|cubin| {
            device
                .load_attention(&request.name, &cubin)
                .map_err(anyhow::Error::from)
        });
        match loaded {
            Ok(kernel) => family.add(v.head_dim, v.dtype, kernel),
            Err(e) => {
                return Evaluation {
                    resources: request.resources,
                    ..Evaluation::failed(
                        request.genome,
                        device.name(),
                        Status::RuntimeFailed,
                        format!("module load failed: {e:#}"),
                    )
                }
            }
        }
    }
    evo_gates::evaluate(
        &mut family,
        &request.genome,
        device.name(),
        request.resources,
        &request.green_cases,
        &request.objective,
        options,
        references,
    )
}

fn read_cubin(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{}: cannot read CUBIN", path.display()))
}

#[cfg(test)]
mod tests {
    //! The worker protocol on the CPU: stand-in workers (shell scripts) that answer,
    //! die mid-evaluation, or hang, so isolation is tested without a GPU.

    use super::*;

    fn request() -> WorkerRequest {
        WorkerRequest {
            name: "t".into(),
            genome: Genome::baseline(),
            variants: Vec::new(),
            resources: None,
            green_cases: Vec::new(),
            objective: vec![Problem::seed()],
            seed: 1,
            confirm: false,
            full_gate: Vec::new(),
        }
    }

    fn answer() -> Evaluation {
        Evaluation {
            score_us: Some(12.5),
            ..Evaluation::failed(Genome::baseline(), "stand-in GPU", Status::Ok, "")
        }
    }

    /// A runner whose worker is `sh -c SCRIPT`; the script has greeted already.
    fn runner(script: &str, timeout: Duration) -> Runner {
        let hello = serde_json::to_string(&Hello::Ready {
            device: "stand-in GPU".into(),
            target: Some(Target::Sm90),
        })
        .unwrap();
        let command = WorkerCommand {
            program: "sh".into(),
            args: vec!["-c".into(), format!("echo '{hello}'; {script}")],
            env: Vec::new(),
        };
        let (worker, _) = Worker::spawn(&command).unwrap();
        Runner {
            gpu: 0,
            command,
            device: "stand-in GPU".into(),
            seed: 0,
            timeout,
            worker: Some(worker),
            evaluated: 0,
            best_us: None,
            late: None,
            usage: GpuUse::default(),
        }
    }

    #[test]
    fn an_answering_worker_returns_its_evaluation() {
        let json = serde_json::to_string(&answer()).unwrap();
        let mut r = runner(
            &format!("while read line; do echo '{json}'; done"),
            Duration::from_secs(20),
        );
        let eval = r.ask(&request());
        assert_eq!(eval.status, Status::Ok);
        assert_eq!(eval.score_us, Some(12.5));
        assert!(r.worker.is_some(), "a healthy worker is kept");
    }

    #[test]
    fn a_worker_that_dies_is_recorded_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("died-once");
        let json = serde_json::to_string(&answer()).unwrap();
        // First worker dies on its first candidate; the replacement answers.
        let script = format!(
            "while read line; do if [ -f {s} ]; then echo '{json}'; else touch {s}; exit 3; fi; done",
            s = state.display()
        );
        let mut r = runner(&script, Duration::from_secs(20));
        let first = r.ask(&request());
        assert_eq!(first.status, Status::RuntimeFailed, "{}", first.detail);
        assert!(first.detail.contains("died"), "{}", first.detail);
        let second = r.ask(&request());
        assert_eq!(second.status, Status::Ok, "{}", second.detail);
    }

    #[test]
    fn a_hanging_worker_is_killed_at_the_timeout() {
        let mut r = runner("read line; sleep 60", Duration::from_millis(700));
        let start = std::time::Instant::now();
        let eval = r.ask(&request());
        assert_eq!(eval.status, Status::Timeout);
        assert!(eval.detail.contains("hung"), "{}", eval.detail);
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(r.worker.is_none(), "the hung worker was dropped (killed)");
    }

    #[test]
    fn an_unreadable_answer_is_a_runtime_failure() {
        let mut r = runner("read line; echo 'not json'", Duration::from_secs(20));
        let eval = r.ask(&request());
        assert_eq!(eval.status, Status::RuntimeFailed);
        assert!(eval.detail.contains("unreadable"), "{}", eval.detail);
    }

    #[test]
    fn a_runtime_failure_answer_retires_the_worker() {
        let failed = Evaluation::failed(
            Genome::baseline(),
            "stand-in GPU",
            Status::RuntimeFailed,
            "illegal address",
        );
        let json = serde_json::to_string(&failed).unwrap();
        let mut r = runner(
            &format!("while read line; do echo '{json}'; done"),
            Duration::from_secs(20),
        );
        assert_eq!(r.ask(&request()).status, Status::RuntimeFailed);
        assert!(
            r.worker.is_none(),
            "a possibly poisoned context is not reused"
        );
    }

    #[test]
    fn a_new_best_is_retimed_before_it_is_crowned() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("requests");
        let json = serde_json::to_string(&answer()).unwrap();
        let script = format!(
            "while read line; do echo x >> {c}; echo '{json}'; done",
            c = count.display()
        );
        let mut r = runner(&script, Duration::from_secs(20));
        let first = r.run_prepared(vec![Prepared::Run(request())], &mut |_| {});
        assert!(
            first[0].detail.contains("re-timed before crowning"),
            "{}",
            first[0].detail
        );
        assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
        // Not faster than the confirmed best: no second timing.
        let mut seen = 0;
        r.run_prepared(vec![Prepared::Run(request())], &mut |_| seen += 1);
        assert_eq!(seen, 1, "each evaluation is handed over as it completes");
        assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 3);
    }

    /// A new best's full-gate variants compile on a thread of their own: the GPU goes on
    /// with the next candidates meanwhile, and the confirmation runs once they are ready
    /// (every new best is still confirmed, with the full gate's variants).
    #[test]
    fn the_gpu_goes_on_while_a_new_best_compiles_its_full_gate() {
        let dir = tempfile::tempdir().unwrap();
        let cubins = dir.path().join("cubins");
        std::fs::create_dir_all(&cubins).unwrap();
        let log = dir.path().join("requests");
        let json = serde_json::to_string(&answer()).unwrap();
        let script = format!(
            "while read line; do echo \"$line\" >> {}; sleep 0.05; echo '{json}'; done",
            log.display()
        );
        let (mut pool, _, _) = RunnerPool::start(
            &stand_in(dir.path(), &script),
            Some(&[0]),
            0,
            Duration::from_secs(60),
        )
        .unwrap();
        // A confirmed best exists, so confirmations overlap (the first one runs in turn).
        pool.runners[0].best_us = Some(100.0);
        pool.runners[0].late = Some(LateCompiler {
            toolchain: Toolchain::discover().expect("NVRTC (run `just nvrtc`)"),
            target: Target::Sm90,
            cubin_dir: cubins.clone(),
        });
        // The first candidate's full gate needs two variants it lacks (a real compile);
        // the others need none.
        let fa2 = named(&["fa2"])[0];
        let first = WorkerRequest {
            genome: fa2,
            full_gate: evo_gates::GreenSuite::Quick.cases(),
            ..request()
        };
        let (tx, rx) = mpsc::channel();
        tx.send((0, Prepared::Run(first))).unwrap();
        for i in 1..4 {
            tx.send((i, Prepared::Run(request()))).unwrap();
        }
        drop(tx);
        let evals = pool.run_stream(rx, 4, &mut |_| {});
        assert_eq!(evals.len(), 4);
        assert!(
            evals[0].detail.contains("re-timed before crowning"),
            "{}",
            evals[0].detail
        );
        let lines = lines_of(&log);
        let confirms: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains("\"confirm\":true"))
            .collect();
        assert!(!confirms.is_empty(), "{lines:?}");
        let fa2_confirm = confirms
            .iter()
            .copied()
            .find(|&i| lines[i].contains(&fa2.id().to_string()))
            .expect("the new best was confirmed");
        assert!(
            lines[fa2_confirm].contains("-d128-bf16.cubin"),
            "confirmed with the full gate's variants: {}",
            lines[fa2_confirm]
        );
        let screens_before = (0..fa2_confirm)
            .filter(|&i| !lines[i].contains("\"confirm\":true"))
            .count();
        assert_eq!(
            screens_before, 4,
            "every candidate was screened while the full gate compiled: {lines:?}"
        );
        assert_eq!(cubins_in(&cubins), 0, "the full gate's CUBINs are removed");
    }

    /// A stand-in worker command: greets as `other GPU` when pinned to GPU 7, else as
    /// `stand-in GPU`, logs `start GPU` when it starts, then runs `script`.
    fn stand_in(dir: &Path, script: &str) -> WorkerCommand {
        let hello = |device: &str| {
            serde_json::to_string(&Hello::Ready {
                device: device.into(),
                target: Some(Target::Sm90),
            })
            .unwrap()
        };
        WorkerCommand {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                format!(
                    "echo \"start $CUDA_VISIBLE_DEVICES\" >> {log}; \
                     if [ \"$CUDA_VISIBLE_DEVICES\" = 7 ]; then echo '{other}'; else echo '{same}'; fi; {script}",
                    log = dir.join("starts").display(),
                    other = hello("other GPU"),
                    same = hello("stand-in GPU"),
                ),
            ],
            env: Vec::new(),
        }
    }

    fn lines_of(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_pool_runs_a_batch_on_every_gpu_and_records_which() {
        let dir = tempfile::tempdir().unwrap();
        let json = serde_json::to_string(&answer()).unwrap();
        let script = format!(
            "while read line; do echo \"$CUDA_VISIBLE_DEVICES\" >> {log}; sleep 0.2; echo '{json}'; done",
            log = dir.path().join("requests").display()
        );
        let command = stand_in(dir.path(), &script);
        let (mut pool, device, _) =
            RunnerPool::start(&command, Some(&[0, 1]), 0, Duration::from_secs(20)).unwrap();
        assert_eq!(device, "stand-in GPU");
        assert_eq!(pool.gpus(), [0, 1]);
        let batch = (0..6).map(|_| Prepared::Run(request())).collect();
        let mut handed = 0;
        let evals = pool.run_prepared(batch, &mut |_| handed += 1);
        assert_eq!((evals.len(), handed), (6, 6));
        assert!(evals.iter().all(|e| e.status == Status::Ok));
        let on = |g| evals.iter().filter(|e| e.device_index == Some(g)).count();
        assert_eq!(on(0) + on(1), 6);
        assert!(
            on(0) > 0 && on(1) > 0,
            "one GPU ran nothing: {} / {}",
            on(0),
            on(1)
        );
        // Each worker saw only its own GPU.
        let requests = lines_of(&dir.path().join("requests"));
        assert!(
            requests.iter().all(|l| l == "0" || l == "1"),
            "{requests:?}"
        );
        assert_eq!(lines_of(&dir.path().join("starts")), ["start 0", "start 1"]);
        // Each GPU's time: its answers took 0.2 s each, all inside its span.
        for u in pool.usage() {
            // Its candidates and the confirmation of its first new best.
            assert_eq!(u.answers as usize, on(u.gpu) + 1, "{u:?}");
            assert!(
                u.busy >= Duration::from_millis(200) * u.answers as u32,
                "{u:?}"
            );
            assert!(u.span >= u.busy && u.late_compile.is_zero(), "{u:?}");
            assert!(u.line().starts_with(&format!("GPU {}: worker busy", u.gpu)));
        }
    }

    /// Candidates that arrive slower than the GPU answers show up as waiting time.
    #[test]
    fn time_spent_waiting_for_compiled_candidates_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let json = serde_json::to_string(&answer()).unwrap();
        let command = stand_in(
            dir.path(),
            &format!("while read line; do sleep 0.05; echo '{json}'; done"),
        );
        let (mut pool, _, _) =
            RunnerPool::start(&command, Some(&[0]), 0, Duration::from_secs(20)).unwrap();
        let (tx, rx) = mpsc::channel();
        let feeder = std::thread::spawn(move || {
            for i in 0..4 {
                // A candidate compiled every 0.3 s.
                std::thread::sleep(Duration::from_millis(300));
                tx.send((i, Prepared::Run(request()))).unwrap();
            }
        });
        let evals = pool.run_stream(rx, 4, &mut |_| {});
        feeder.join().unwrap();
        assert_eq!(evals.len(), 4);
        let u = pool.usage()[0];
        assert_eq!(
            u.answers, 5,
            "4 candidates and the first one's confirmation"
        );
        // Three gaps of about 0.25 s between answers of about 0.05 s.
        assert!(u.waiting() >= Duration::from_millis(600), "{}", u.line());
        assert!(u.busy < u.waiting(), "{}", u.line());
    }

    #[test]
    fn gpus_of_two_models_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let command = stand_in(dir.path(), "cat > /dev/null");
        let err = RunnerPool::start(&command, Some(&[0, 7]), 0, Duration::from_secs(20))
            .err()
            .expect("two models are refused");
        let message = err.to_string();
        assert!(
            message.contains("one search runs on one GPU model")
                && message.contains("GPU 0: stand-in GPU")
                && message.contains("GPU 7: other GPU"),
            "{message}"
        );
    }

    #[test]
    fn a_dead_worker_is_replaced_on_its_own_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let json = serde_json::to_string(&answer()).unwrap();
        // The first worker on GPU 1 dies on its first candidate.
        let script = format!(
            "while read line; do if [ \"$CUDA_VISIBLE_DEVICES\" = 1 ] && [ ! -f {s} ]; then touch {s}; exit 3; fi; sleep 0.2; echo '{json}'; done",
            s = dir.path().join("died").display()
        );
        let command = stand_in(dir.path(), &script);
        let (mut pool, _, _) =
            RunnerPool::start(&command, Some(&[0, 1]), 0, Duration::from_secs(20)).unwrap();
        let batch = (0..6).map(|_| Prepared::Run(request())).collect();
        let evals = pool.run_prepared(batch, &mut |_| {});
        let died: Vec<&Evaluation> = evals
            .iter()
            .filter(|e| e.status == Status::RuntimeFailed)
            .collect();
        assert_eq!(died.len(), 1, "{evals:?}");
        assert_eq!(died[0].device_index, Some(1));
        assert!(died[0].detail.contains("died"), "{}", died[0].detail);
        let mut starts = lines_of(&dir.path().join("starts"));
        starts.sort();
        assert_eq!(starts, ["start 0", "start 1", "start 1"]);
    }

    #[test]
    fn gpu_ordinals_count_within_the_schedulers_list() {
        assert_eq!(pin(None, 1).unwrap(), "1");
        assert_eq!(pin(Some("2,5"), 1).unwrap(), "5");
        let err = pin(Some("2,5"), 2).unwrap_err().to_string();
        assert!(
            err.contains("CUDA_VISIBLE_DEVICES=2,5 shows 2 GPU(s)"),
            "{err}"
        );
        assert_eq!(parse_gpus("0, 1").unwrap(), [0, 1]);
        assert!(parse_gpus("0,0")
            .unwrap_err()
            .to_string()
            .contains("named twice"));
        assert!(parse_gpus("first")
            .unwrap_err()
            .to_string()
            .contains("`first` is not a GPU ordinal"));
    }

    #[test]
    fn chosen_gpus_take_each_candidate_as_soon_as_it_is_compiled() {
        let dir = tempfile::tempdir().unwrap();
        let json = serde_json::to_string(&answer()).unwrap();
        let script = format!("while read line; do sleep 0.1; echo '{json}'; done");
        let command = stand_in(dir.path(), &script);
        let (runner, device, target) =
            RunnerPool::start(&command, Some(&[0, 1]), 0, Duration::from_secs(20)).unwrap();
        assert_eq!(runner.gpus(), vec![0, 1]);
        let plan = GpuPlan {
            green_cases: Vec::new(),
            full_gate: Vec::new(),
            objective: vec![Problem::seed()],
            seed: 0,
            timeout: Duration::from_secs(20),
            cubin_dir: dir.path().to_path_buf(),
            plant: None,
        };
        let mut evaluator = evaluator_of(runner, plan, device, target);
        let batch = named(&["champion-h100-seed", "fa2", "v7a", "phase6", "v6a", "v5"]);
        let mut handed = 0;
        let evals = evaluator
            .evaluate_each(&batch, &mut |_| handed += 1)
            .unwrap();
        assert_eq!((evals.len(), handed), (6, 6));
        let on = |g| evals.iter().filter(|e| e.device_index == Some(g)).count();
        assert!(
            on(0) > 0 && on(1) > 0,
            "one GPU ran nothing: {} / {}",
            on(0),
            on(1)
        );
        assert_eq!(
            on(0) + on(1),
            6,
            "every candidate compiled and ran: {evals:?}"
        );
        assert!(evaluator
            .describe()
            .contains("2 child workers, one per GPU (0,1)"));
    }

    /// A GPU evaluator over stand-in workers, compiling with the real NVRTC.
    fn evaluator_of(
        runner: RunnerPool,
        plan: GpuPlan,
        device: String,
        target: Option<Target>,
    ) -> GpuEvaluator {
        GpuEvaluator {
            runner,
            compiler: Arc::new(BatchCompiler {
                plan,
                toolchain: Toolchain::discover().expect("NVRTC (run `just nvrtc`)"),
                device,
                target: target.unwrap(),
                prepared: AtomicUsize::new(0),
            }),
            ahead: Default::default(),
        }
    }

    fn named(names: &[&str]) -> Vec<Genome> {
        names
            .iter()
            .map(|n| {
                evo_genome::GenomeFile::load(
                    &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../genomes/{n}.toml")),
                )
                .unwrap()
                .genes
            })
            .collect()
    }

    fn cubins_in(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "cubin")
            })
            .count()
    }

    /// A pipelined search announces its next batch: it compiles in the background before
    /// it is asked for, then runs from what was compiled; an announced batch that is not
    /// asked for after all leaves no CUBIN behind.
    #[test]
    fn a_batch_announced_ahead_compiles_before_it_is_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let cubins = dir.path().join("cubins");
        std::fs::create_dir_all(&cubins).unwrap();
        let json = serde_json::to_string(&answer()).unwrap();
        let requests = dir.path().join("requests");
        let script = format!(
            "while read line; do echo \"$line\" >> {}; echo '{json}'; done",
            requests.display()
        );
        let (runner, device, target) = RunnerPool::start(
            &stand_in(dir.path(), &script),
            Some(&[0]),
            0,
            Duration::from_secs(20),
        )
        .unwrap();
        let plan = GpuPlan {
            green_cases: Vec::new(),
            full_gate: Vec::new(),
            objective: vec![Problem::seed()],
            seed: 0,
            timeout: Duration::from_secs(20),
            cubin_dir: cubins.clone(),
            plant: None,
        };
        let mut evaluator = evaluator_of(runner, plan, device, target);
        // The search's order: batch k + 1 is announced before batch k is asked for.
        let (b0, b1, b2, b3) = (
            named(&["v3"]),
            named(&["fa2", "v6a"]),
            named(&["v5", "champion-h100-seed"]),
            named(&["phase6"]),
        );
        evaluator.prefetch(&b1);
        // b1 compiles with no evaluate call: in the background.
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while cubins_in(&cubins) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "nothing compiled ahead"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Asking for another batch meanwhile leaves b1 announced.
        assert_eq!(evaluator.evaluate_each(&b0, &mut |_| {}).unwrap().len(), 1);
        assert_eq!(evaluator.ahead.len(), 1);
        evaluator.prefetch(&b2);
        assert_eq!(evaluator.evaluate_each(&b1, &mut |_| {}).unwrap().len(), 2);
        assert_eq!(evaluator.ahead.len(), 1, "b2 stays announced");
        let asked = lines_of(&requests).join("\n");
        for g in b0.iter().chain(&b1) {
            assert!(asked.contains(&g.id().to_string()), "{asked}");
        }
        // b2 is never asked for: b3 runs, and b2's CUBINs go when the evaluator does.
        assert_eq!(evaluator.evaluate_each(&b3, &mut |_| {}).unwrap().len(), 1);
        assert!(lines_of(&requests)
            .last()
            .unwrap()
            .contains(&b3[0].id().to_string()));
        drop(evaluator);
        assert_eq!(cubins_in(&cubins), 0, "CUBINs left behind");
    }
}
