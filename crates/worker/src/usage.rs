//! Where each GPU's time went: answering, or waiting for compiles.

use std::time::Duration;

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
    /// Of `busy`: the new bests' confirmations (the full gate and FAST again), and how many.
    pub confirming: Duration,
    pub confirmations: u64,
    /// New bests not re-timed because a best as fast was confirmed before their turn,
    /// and how many of them never compiled their full gate (they waited on its claim).
    pub overtaken: u64,
    pub overtaken_uncompiled: u64,
    pub span: Duration,
    pub(crate) first: Option<std::time::Instant>,
}

impl GpuUse {
    pub(crate) fn asked(&mut self, at: std::time::Instant, answered: std::time::Instant) {
        let first = *self.first.get_or_insert(at);
        self.busy += answered - at;
        self.span = answered - first;
        self.answers += 1;
    }

    /// One confirmation's answer took `took` (already counted in `busy` by [`asked`]).
    pub(crate) fn confirmed(&mut self, took: Duration) {
        self.confirming += took;
        self.confirmations += 1;
    }

    /// The time it waited for compiled candidates.
    pub fn waiting(&self) -> Duration {
        self.span.saturating_sub(self.busy + self.late_compile)
    }

    /// `GPU 0: worker busy 42.0 s of 72.0 s (58%, 310 answers, 9 of them new bests'
    /// confirmations taking 6.1 s); waited 22.7 s for compiled candidates, 7.3 s for new
    /// bests' full-gate compiles`, then, when some were, `; 5 new bests overtaken before
    /// their turn (3 of them compiled no full gate)`.
    pub fn line(&self) -> String {
        let overtaken = if self.overtaken > 0 {
            format!(
                "; {} new bests overtaken before their turn ({} of them compiled no full gate)",
                self.overtaken, self.overtaken_uncompiled
            )
        } else {
            String::new()
        };
        let span = self.span.as_secs_f64();
        format!(
            "GPU {}: worker busy {:.1} s of {:.1} s ({:.0}%, {} answers, {} of them new bests' confirmations taking {:.1} s); waited {:.1} s for compiled candidates, {:.1} s for new bests' full-gate compiles{overtaken}",
            self.gpu,
            self.busy.as_secs_f64(),
            span,
            if span > 0.0 {
                100.0 * self.busy.as_secs_f64() / span
            } else {
                0.0
            },
            self.answers,
            self.confirmations,
            self.confirming.as_secs_f64(),
            self.waiting().as_secs_f64(),
            self.late_compile.as_secs_f64()
        )
    }
}
