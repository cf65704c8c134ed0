//! The runner pool: one [`Runner`] per GPU, all of one model.

use crate::bar::Bar;
use crate::child::{Worker, WorkerCommand};
use crate::compiler::Prepared;
use crate::gpus::require_one_model;
use crate::protocol::Hello;
use crate::runner::Runner;
use crate::usage::GpuUse;
use anyhow::bail;
use evo_gates::Evaluation;
use evo_genome::Target;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One [`Runner`] per GPU; a batch's candidates go to whichever is free.
pub struct RunnerPool {
    pub(crate) runners: Vec<Runner>,
}

impl RunnerPool {
    /// Starts a worker on each GPU (`None`: one worker on the first GPU, unpinned) and
    /// checks that they are one model: returns the pool, the model and its target.
    pub(crate) fn start(
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
        // The workers start at once: each spends its start opening a CUDA context, and
        // one after another they would add up with every GPU.
        let started: Vec<anyhow::Result<(Worker, Hello)>> = std::thread::scope(|scope| {
            let starts: Vec<_> = lanes
                .iter()
                .map(|(_, command)| scope.spawn(move || Worker::spawn(command)))
                .collect();
            starts
                .into_iter()
                .map(|s| s.join().expect("a worker's start does not panic"))
                .collect()
        });
        let mut runners = Vec::new();
        let best = Arc::new(Bar::default());
        let mut models: Vec<(u32, String, Option<Target>)> = Vec::new();
        for ((gpu, command), started) in lanes.into_iter().zip(started) {
            let (worker, hello) = started?;
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
                best: best.clone(),
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
    pub(crate) fn run_stream(
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
        results
            .into_iter()
            .map(|e| e.expect("every candidate was answered"))
            .collect()
    }
}
