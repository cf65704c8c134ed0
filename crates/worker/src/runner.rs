//! A [`Runner`]: feeds one GPU's worker child, one candidate at a time, and replaces the
//! child when it dies or hangs; a new best is confirmed by the full gate before it is
//! crowned.

use crate::bar::Bar;
use crate::child::{Worker, WorkerCommand};
use crate::compiler::{remove_files, Prepared};
use crate::late::{late_compile, LateCompiled, LateCompiler};
use crate::protocol::{Hello, VariantFile, WorkerRequest, SEED_POOL};
use crate::usage::GpuUse;
use evo_gates::{Evaluation, Status};
use std::io::Write;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

/// Feeds prepared candidates to the worker child, replacing it when it dies or hangs.
pub struct Runner {
    /// The GPU its worker is pinned to (recorded on its evaluations).
    pub(crate) gpu: u32,
    pub(crate) command: WorkerCommand,
    pub(crate) device: String,
    pub(crate) seed: u64,
    pub(crate) timeout: Duration,
    pub(crate) worker: Option<Worker>,
    pub(crate) evaluated: u64,
    /// The best score confirmed on any GPU of the pool; a candidate that beats it is
    /// re-timed.
    pub(crate) best: Arc<Bar>,
    /// Compiles the variants only the full gate needs, for a candidate about to be
    /// crowned (the screen compiles only its own and the objective's).
    pub(crate) late: Option<LateCompiler>,
    /// Where this runner's time went (see [`GpuUse`]).
    pub(crate) usage: GpuUse,
}

/// `detail` with `note` in front.
pub(crate) fn note(detail: &str, note: &str) -> String {
    if detail.is_empty() {
        note.to_string()
    } else {
        format!("{note}; {detail}")
    }
}

impl Runner {
    pub(crate) fn beats_best(&self, us: f64) -> bool {
        self.best.get().is_none_or(|best| us < best)
    }

    /// A new best passes the full gate before it is crowned: the full GREEN (fixed and
    /// drawn cases) and a verified FAST re-timed alone, with more repeats and a longer
    /// warm-up, on new inputs; the confirmed figure is the one recorded.
    pub(crate) fn confirm(&mut self, request: WorkerRequest, first_us: f64) -> Evaluation {
        let compiling = std::time::Instant::now();
        let compiled = late_compile(self.late.clone(), request);
        if self.late.is_some() {
            self.usage.late_compile += compiling.elapsed();
        }
        self.confirm_compiled(compiled, first_us)
    }

    /// The confirmation once its full-gate variants are compiled ([`late_compile`]).
    pub(crate) fn confirm_compiled(&mut self, compiled: LateCompiled, first_us: f64) -> Evaluation {
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
        let asked = std::time::Instant::now();
        let mut again = self.ask(&request);
        self.usage.confirmed(asked.elapsed());
        remove_files(&late_files);
        match again.score_us {
            Some(us) if again.is_ok() => {
                self.best.lower(us);
                again.detail = note(
                    &again.detail,
                    &format!(
                        "new best re-timed before crowning: first {first_us:.2} µs, confirmed {us:.2} µs"
                    ),
                );
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
    pub(crate) fn ask(&mut self, request: &WorkerRequest) -> Evaluation {
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
                        "no answer within {:.0} s while running {}: the worker was killed (a kernel that hangs, or a gate that needs longer at this shape: give --timeout more seconds)",
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
    pub(crate) fn screen(&mut self, request: &mut WorkerRequest) -> Evaluation {
        request.seed = self.seed.wrapping_add(self.evaluated % SEED_POOL);
        self.evaluated += 1;
        self.ask(request)
    }

    /// A candidate's last evaluation: its screen's CUBINs removed, its GPU recorded.
    pub(crate) fn settle(&self, mut eval: Evaluation, screening: &[VariantFile]) -> Evaluation {
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
