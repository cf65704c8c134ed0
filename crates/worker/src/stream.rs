//! A steady-state search's way through the GPUs: each candidate starts compiling the
//! moment it is submitted, waits compiled in one queue for the first free GPU, and its
//! answer comes back as soon as it exists; no candidate waits for another's batch.
//!
//! The lanes (one thread per GPU, each owning its [`Runner`]) live as long as
//! candidates are waiting, so a new best confirmed on one GPU is the bar for the other
//! at once, and a new best's full-gate compile overlaps the next candidates as in a
//! batch.

use crate::compiler::{BatchCompiler, Prepared};
use crate::runner::Runner;
use evo_gates::Evaluation;
use evo_genome::Genome;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Compiled candidates a steady-state search should keep queued per GPU besides the one
/// it runs: a GPU that answers finds the next one ready, even when another GPU took
/// one meanwhile.
pub const QUEUED_PER_GPU: usize = 2;

/// Candidates submitted, compiling or compiled, on their way to the GPUs.
pub(crate) struct Stream {
    /// Where a compiled candidate goes; the lanes end once it and every compile's copy
    /// of it are gone.
    compiled: Sender<(usize, Prepared)>,
    answers: Receiver<(usize, Evaluation)>,
    lanes: Vec<JoinHandle<Runner>>,
    submitted: usize,
    /// Submitted and not yet answered.
    waiting: usize,
}

impl Stream {
    /// Starts a lane per runner: each takes the next compiled candidate when its GPU is
    /// free.
    pub(crate) fn open(runners: Vec<Runner>) -> Stream {
        let (compiled, source) = mpsc::channel();
        let source = Arc::new(Mutex::new(source));
        let (answered, answers) = mpsc::channel();
        let lanes = runners
            .into_iter()
            .map(|mut runner| {
                let source = source.clone();
                let answered = answered.clone();
                std::thread::spawn(move || {
                    runner.run_stream_lane(&source, &answered);
                    runner
                })
            })
            .collect();
        Stream {
            compiled,
            answers,
            lanes,
            submitted: 0,
            waiting: 0,
        }
    }

    /// Starts compiling `genome` on the compile threads, after the candidates submitted
    /// before it; compiled, it joins the queue.
    pub(crate) fn submit(&mut self, compiler: &Arc<BatchCompiler>, genome: Genome) {
        let ticket = self.submitted;
        self.submitted += 1;
        self.waiting += 1;
        let compiled = self.compiled.clone();
        let own = compiler.clone();
        compiler.spawn(move || {
            // The receiver lives until the stream closes, after every answer.
            let _ = compiled.send((ticket, own.compile_one(&genome)));
        });
    }

    /// The next answer of any GPU; none when the lanes ended (a lane that lost its
    /// answer channel).
    pub(crate) fn next(&mut self) -> Option<Evaluation> {
        let (_, evaluation) = self.answers.recv().ok()?;
        self.waiting -= 1;
        Some(evaluation)
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Ends the lanes once the candidates still waiting have answered (their answers
    /// are dropped); the runners come back in the order they went.
    pub(crate) fn close(self) -> Vec<Runner> {
        let Stream {
            compiled,
            answers,
            lanes,
            ..
        } = self;
        drop(compiled);
        // The lanes end once the compiles still running have sent their candidates
        // and those have run.
        let runners = lanes
            .into_iter()
            .map(|lane| lane.join().expect("a lane does not panic"))
            .collect();
        drop(answers);
        runners
    }
}
