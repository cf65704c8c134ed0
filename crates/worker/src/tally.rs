//! What the compiles cost over a run: the supply side of the GPUs' waits.

use evo_gates::compile::BuiltVariant;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The variants NVRTC compiled over a run (the screen's and the full gate's late ones)
/// and the seconds each took on its thread. A variant taken from the CUBIN cache cost
/// nothing and is not counted.
///
/// Set beside the compile threads' count and the run's length, it tells a GPU that
/// waited for compiled candidates because the cores were full (the threads near 100%
/// busy) from one that waited for another reason.
#[derive(Debug)]
pub struct CompileTally {
    started: Instant,
    compiled: AtomicU64,
    failed: AtomicU64,
    micros: AtomicU64,
}

impl Default for CompileTally {
    fn default() -> Self {
        CompileTally::new()
    }
}

impl CompileTally {
    /// An empty tally whose run starts now.
    pub fn new() -> CompileTally {
        CompileTally {
            started: Instant::now(),
            compiled: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            micros: AtomicU64::new(0),
        }
    }

    /// Counts what one call compiled: each variant NVRTC built (with its seconds) or
    /// failed to build. Variants from the cache carry no seconds and are skipped.
    pub fn add(&self, built: &[BuiltVariant]) {
        for v in built {
            match &v.result {
                Ok(c) if c.seconds > 0.0 => {
                    self.compiled.fetch_add(1, Ordering::Relaxed);
                    self.micros
                        .fetch_add((c.seconds * 1e6).round() as u64, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(_) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Variants compiled, variants that failed to compile, and NVRTC's thread-seconds
    /// for the compiled ones.
    pub fn totals(&self) -> (u64, u64, Duration) {
        (
            self.compiled.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            Duration::from_micros(self.micros.load(Ordering::Relaxed)),
        )
    }

    /// The line for `threads` compile threads over the run so far; `None` when nothing
    /// was compiled.
    pub fn line(&self, threads: usize) -> Option<String> {
        self.line_over(threads, self.started.elapsed())
    }

    /// `compiles: 612 variants (3 failed) took NVRTC 1205.3 thread-seconds, 1.97 s each: 97% of 30 compile threads over 41.2 s`.
    pub fn line_over(&self, threads: usize, span: Duration) -> Option<String> {
        let (compiled, failed, seconds) = self.totals();
        if compiled == 0 && failed == 0 {
            return None;
        }
        let seconds = seconds.as_secs_f64();
        let capacity = threads.max(1) as f64 * span.as_secs_f64();
        Some(format!(
            "compiles: {compiled} variants ({failed} failed) took NVRTC {seconds:.1} \
             thread-seconds, {:.2} s each: {:.0}% of {threads} compile threads over {:.1} s",
            if compiled > 0 {
                seconds / compiled as f64
            } else {
                0.0
            },
            if capacity > 0.0 {
                100.0 * seconds / capacity
            } else {
                0.0
            },
            span.as_secs_f64()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_codegen::{Compiled, PtxasReport};
    use evo_genome::{Dtype, HeadDim};

    fn variant(result: Result<f64, &str>) -> BuiltVariant {
        BuiltVariant {
            head_dim: HeadDim::D64,
            dtype: Dtype::F16,
            result: result
                .map(|seconds| Compiled {
                    name: "k".into(),
                    ptx: String::new(),
                    cubin: vec![1],
                    log: String::new(),
                    options: Vec::new(),
                    report: PtxasReport::parse(""),
                    seconds,
                })
                .map_err(str::to_string),
        }
    }

    /// Compiled variants count with their seconds, failed ones without, cached ones
    /// (no seconds) not at all; the line divides by the threads' capacity.
    #[test]
    fn the_tally_counts_compiles_and_says_how_busy_the_threads_were() {
        let tally = CompileTally::new();
        assert_eq!(tally.line_over(4, Duration::from_secs(10)), None);
        tally.add(&[variant(Ok(1.5)), variant(Ok(0.0)), variant(Err("log"))]);
        tally.add(&[variant(Ok(2.5))]);
        assert_eq!(tally.totals(), (2, 1, Duration::from_secs(4)));
        assert_eq!(
            tally.line_over(4, Duration::from_secs(2)).unwrap(),
            "compiles: 2 variants (1 failed) took NVRTC 4.0 thread-seconds, 2.00 s each: \
             50% of 4 compile threads over 2.0 s"
        );
    }
}
