//! A GPU's lane of a steady-state stream: candidates as they arrive, and new bests'
//! confirmations while the GPU goes on.

use crate::bar::Bar;
use crate::compiler::{remove_files, Prepared};
use crate::late::{Confirming, Late};
use crate::runner::{note, Runner};
use evo_gates::Evaluation;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// How long a lane with a confirmation pending waits for a candidate before it looks
/// at its late compiles again.
const PENDING_POLL: Duration = Duration::from_millis(10);

/// The next compiled candidate of the lanes' shared queue. A lane with nothing pending
/// waits for one as long as it takes. A lane with a confirmation pending (`pending`)
/// waits at most [`PENDING_POLL`], and does not wait for the queue at all while another
/// lane holds it: that lane may be waiting for a candidate that comes only once this
/// lane's confirmation is answered (the search's last candidates), and a lane that
/// waited for it to let go would wait forever.
pub(crate) fn next_candidate<T>(
    source: &Mutex<Receiver<T>>,
    pending: bool,
) -> Result<T, RecvTimeoutError> {
    if !pending {
        let source = source.lock().expect("no thread panics holding it");
        return source.recv().map_err(|_| RecvTimeoutError::Disconnected);
    }
    match source.try_lock() {
        Ok(source) => source.recv_timeout(PENDING_POLL),
        Err(std::sync::TryLockError::WouldBlock) => {
            std::thread::sleep(PENDING_POLL);
            Err(RecvTimeoutError::Timeout)
        }
        Err(std::sync::TryLockError::Poisoned(_)) => panic!("no thread panics holding it"),
    }
}

impl Runner {
    /// One runner's share of a stream: candidates as they arrive, each new best's
    /// full-gate variants compiled on a thread of their own while this GPU goes on with
    /// the next candidates, its confirmation run as soon as they are ready (so the GPU
    /// does not wait for that compile unless it has nothing else to do).
    ///
    /// A candidate screened meanwhile that beats the confirmed best waits for its own
    /// confirmation. Its full gate compiles at once unless a screen as fast, on any GPU,
    /// already holds a claim ([`Bar::claim`]); then it compiles only if that one's
    /// confirmation leaves it a new best. When its turn comes, it is re-timed only if it
    /// still beats the best confirmed by then on any GPU (one that does not would not be
    /// crowned, and its screen is its record, as for any candidate slower than the
    /// best). Before any best is confirmed, confirmations run in turn.
    pub(crate) fn run_stream_lane(
        &mut self,
        source: &Mutex<Receiver<(usize, Prepared)>>,
        results: &mpsc::Sender<(usize, Evaluation)>,
    ) {
        let mut confirming: Vec<Confirming> = Vec::new();
        let mut open = true;
        loop {
            let settled = self.settle_confirmations(&mut confirming, open);
            for answer in settled {
                if results.send(answer).is_err() {
                    release_claims(&self.best, &confirming);
                    return;
                }
            }
            if !open {
                if confirming.is_empty() {
                    return;
                }
                // Only new bests waiting on another GPU's claim are left.
                std::thread::sleep(PENDING_POLL);
                continue;
            }
            // A poll that finds no candidate while a confirmation is pending is time spent
            // waiting for candidates (its late compile runs beside the GPU either way), so
            // it is not added to the full-gate compile waits: those are the first
            // confirmation's compile and the compiles the stream's end waits for.
            let next = next_candidate(source, !confirming.is_empty());
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
                        Some(first_us) if self.best.get().is_none() => {
                            let eval = self.confirm(request.clone(), first_us);
                            self.settle(eval, &request.variants)
                        }
                        Some(first_us) => {
                            let screening = request.variants.clone();
                            let late = if self.best.claim(first_us) {
                                Late::compile(self.late.clone(), request)
                            } else {
                                Late::Deferred(Box::new(request))
                            };
                            confirming.push(Confirming {
                                index,
                                first_us,
                                screened: eval,
                                screening,
                                late,
                            });
                            continue;
                        }
                        None => self.settle(eval, &request.variants),
                    }
                }
            };
            if results.send((index, eval)).is_err() {
                release_claims(&self.best, &confirming);
                return;
            }
        }
    }

    /// Settles what it can of the new bests waiting: a deferred one whose claimant is
    /// settled claims its compile, or keeps its screen when the bar passed it; one whose
    /// compile is done (every one, at the stream's end) is confirmed or keeps its screen.
    /// Returns the answers settled.
    fn settle_confirmations(
        &mut self,
        confirming: &mut Vec<Confirming>,
        open: bool,
    ) -> Vec<(usize, Evaluation)> {
        let mut settled = Vec::new();
        let mut i = 0;
        while i < confirming.len() {
            let first_us = confirming[i].first_us;
            let step = match &confirming[i].late {
                Late::Compiling(compile) if compile.is_finished() || !open => Step::Settle,
                Late::Compiling(_) => Step::Wait,
                // The bar passed it while it waited: its screen is its record.
                Late::Deferred(_) if !self.beats_best(first_us) => Step::Settle,
                // Still a new best, and no screen as fast holds a claim any more.
                Late::Deferred(_) if self.best.claim(first_us) => Step::Compile,
                Late::Deferred(_) => Step::Wait,
            };
            match step {
                Step::Wait => {
                    i += 1;
                    continue;
                }
                Step::Compile => {
                    let c = confirming.remove(i);
                    let Late::Deferred(request) = c.late else {
                        unreachable!("only a deferred new best claims a compile here")
                    };
                    let late = Late::compile(self.late.clone(), *request);
                    confirming.insert(i, Confirming { late, ..c });
                    i += 1;
                    continue;
                }
                Step::Settle => {}
            }
            let c = confirming.remove(i);
            let eval = match c.late {
                Late::Compiling(compile) => {
                    let waited = std::time::Instant::now();
                    let compiled = compile.join().expect("a late compile does not panic");
                    if !open {
                        self.usage.late_compile += waited.elapsed();
                    }
                    let eval = if self.beats_best(c.first_us) {
                        self.confirm_compiled(compiled, c.first_us)
                    } else {
                        if let Ok(files) = &compiled.files {
                            remove_files(files);
                        }
                        self.usage.overtaken += 1;
                        not_retimed(c.screened)
                    };
                    self.best.release(c.first_us);
                    eval
                }
                Late::Deferred(_) => {
                    self.usage.overtaken += 1;
                    self.usage.overtaken_uncompiled += 1;
                    not_retimed(c.screened)
                }
            };
            settled.push((c.index, self.settle(eval, &c.screening)));
        }
        settled
    }
}

/// What a waiting new best does next.
enum Step {
    Wait,
    /// Claims its full gate's compile (a deferred one).
    Compile,
    /// Is confirmed, or keeps its screen.
    Settle,
}

/// A new best's screen as its record: a best confirmed while it waited (here or on
/// another GPU) is as fast, so it would not be crowned and is not re-timed.
fn not_retimed(mut screened: Evaluation) -> Evaluation {
    screened.detail = note(
        &screened.detail,
        "not re-timed: a best confirmed while it waited is as fast",
    );
    screened
}

/// The claims a lane that stops early still holds: given up, so no other lane waits on
/// them.
fn release_claims(bar: &Bar, confirming: &[Confirming]) {
    for c in confirming {
        if let Late::Compiling(_) = c.late {
            bar.release(c.first_us);
        }
    }
}
