//! FAST: how fast is it, and did the timed launches compute? Only ever run on kernels
//! that passed GREEN.
//!
//! The problem has `sets` resident input sets (enough to overflow L2 twice, so the
//! numbers are not L2-resident best cases) and a pool of `sets + 1` distinct inputs
//! drawn from the run seed. A repeat first, outside the timed region, poisons every
//! set's O (guard restored) and refills set `i` with pool entry `(i + repeat) mod
//! (sets + 1)` by device-to-device copies; then it launches each set exactly once
//! between two events. So every timed launch computes on inputs that set did not hold
//! in the repeat before, into an output that holds no result: a kernel that returns
//! at once when O already holds finite values, that memoizes by buffer pointer, or
//! that computes on only every k-th launch leaves poison behind.
//!
//! After the repeats every set's O is compared with the reference of the inputs it
//! holds ([`verify`]): the CPU reference of [`crate::reference`], with all rows where
//! the problem is small and sampled rows per (b, h) where it is large, the same
//! sampling GREEN uses. A device reference would be faster for large shapes but is
//! one more kernel to trust; the pool's references are computed once per run and
//! shared by every kernel gated with that seed, so the CPU costs little per kernel.
//!
//! Repeats whose launches are shorter than [`FastOptions::graph_below_us`] each are
//! a captured CUDA graph replayed between the events (host launch gaps would
//! otherwise be timed as kernel time); the refills are plain stream copies before
//! the start event, so the graph's buffers never change.

use crate::error::GateError;
use crate::green::{judge, LaunchCheck};
use crate::inputs::Inputs;
use crate::kernel::{pool_index, AttentionKernel, Output, TimingMethod};
use crate::outcome::Timing;
use crate::reference::Reference;
use evo_genome::Problem;
use rayon::prelude::*;
use std::sync::Arc;

/// H100's L2 (50 MB); the L4's is 48 MB, so one figure serves both targets.
pub const L2_BYTES: u64 = 50 * 1024 * 1024;
/// At most this many input sets (64 seed-shape sets are 128 MB).
pub const MAX_INPUT_SETS: usize = 64;
#[derive(Debug, Clone, Copy)]
pub struct FastOptions {
    pub repeats: u32,
    /// Warm-up duration, milliseconds (module load, first-touch, clocks ramping).
    pub warmup_ms: f64,
    /// Calls shorter than this (µs) are timed by graph replay.
    pub graph_below_us: f64,
    /// Device time the repeats may take, milliseconds: a slow kernel on a large shape
    /// gets fewer repeats (never under 3) instead of holding the GPU for minutes.
    pub budget_ms: f64,
}

impl Default for FastOptions {
    fn default() -> Self {
        FastOptions {
            repeats: 20,
            warmup_ms: 25.0,
            graph_below_us: 200.0,
            budget_ms: 4000.0,
        }
    }
}

impl FastOptions {
    /// The re-timing of a suspiciously large improvement: three times the repeats and
    /// a longer warm-up, run alone on freshly prepared buffers.
    pub fn confirmation(self) -> FastOptions {
        FastOptions {
            repeats: self.repeats * 3,
            warmup_ms: self.warmup_ms * 4.0,
            ..self
        }
    }
}

/// Bytes one call reads and writes: Q, K, V and O.
pub fn io_bytes(p: &Problem) -> u64 {
    2 * (2 * p.q_elems() as u64 + 2 * p.kv_elems() as u64)
}

/// Input sets to rotate among: enough to overflow L2 twice, or 1 when one set already
/// does (then rotation would only waste memory).
pub fn input_sets(p: &Problem) -> usize {
    let bytes = io_bytes(p).max(1);
    if bytes >= L2_BYTES {
        return 1;
    }
    (2 * L2_BYTES)
        .div_ceil(bytes)
        .clamp(1, MAX_INPUT_SETS as u64) as usize
}

/// The pool FAST refills its sets from: one more entry than there are sets.
pub fn pool_len(p: &Problem) -> usize {
    input_sets(p) + 1
}

/// What FAST measured and what the timed launches produced.
#[derive(Debug, Clone)]
pub struct Fast {
    pub timing: Timing,
    /// One check per set, against the reference of the inputs it held last.
    pub checks: Vec<LaunchCheck>,
}

impl Fast {
    /// The first failing set's reason, naming the check; `None` when all passed.
    pub fn failure(&self) -> Option<String> {
        let failed = self.checks.iter().filter(|c| c.failure.is_some()).count();
        self.checks.iter().enumerate().find_map(|(i, c)| {
            c.failure.as_ref().map(|f| {
                format!(
                    "FAST verification (the timed launches' outputs against the reference): \
                     {failed} of {} input sets wrong after {} timed repeats, first set {i} \
                     (input seed {}): {f}",
                    self.checks.len(),
                    self.timing.repeats,
                    c.input_seed
                )
            })
        })
    }

    /// The worst check (a failing one first), for records that keep one.
    pub fn worst(&self) -> Option<LaunchCheck> {
        self.checks
            .iter()
            .find(|c| c.failure.is_some())
            .or_else(|| {
                self.checks
                    .iter()
                    .max_by(|a, b| a.rel_frob.total_cmp(&b.rel_frob))
            })
            .cloned()
    }
}

/// Times `kernel` on the pool's problem and checks what the timed launches produced.
/// `pool` holds `pool_len(problem)` distinct inputs with their references.
pub fn time_problem(
    kernel: &mut dyn AttentionKernel,
    pool: &[Arc<(Inputs, Reference)>],
    options: &FastOptions,
) -> Result<Fast, GateError> {
    let problem = pool
        .first()
        .map(|e| e.0.problem)
        .ok_or_else(|| GateError::Abi("FAST needs a pool of inputs".into()))?;
    let sets = (pool.len() - 1).max(1);
    let inputs: Vec<&Inputs> = pool.iter().map(|e| &e.0).collect();
    let t0 = std::time::Instant::now();
    kernel.prepare_timing(&inputs, sets)?;
    let t_prepare = t0.elapsed();

    // Warm-up (module load, first touch, clocks ramping): repeats until warmup_ms
    // has passed on the device.
    let mut repeat = 0;
    let mut spent = 0.0;
    while spent < options.warmup_ms && repeat < 1000 {
        spent += kernel.time_repeat(repeat, TimingMethod::Events)?;
        repeat += 1;
    }
    // Events around host launches include the host's launch gaps (a few µs per
    // kernel), so a launch is sized by a graph replay: device time only. A kernel (or
    // library) that cannot be captured is timed with events, and the timing says so.
    let warm_us = spent / repeat as f64 * 1e3 / sets as f64;
    let mut method = TimingMethod::Events;
    let mut repeat_ms = spent / repeat as f64;
    if warm_us < options.graph_below_us.max(1000.0) {
        let graphed = kernel
            .time_repeat(repeat, TimingMethod::Graph)
            .and_then(|_| kernel.time_repeat(repeat + 1, TimingMethod::Graph));
        repeat += 2;
        if let Ok(ms) = graphed {
            if ms * 1e3 / (sets as f64) < options.graph_below_us {
                method = TimingMethod::Graph;
                repeat_ms = ms;
            }
        }
    }
    let repeats = options
        .repeats
        .min(((options.budget_ms / repeat_ms.max(1e-6)) as u32).max(3));
    let t_warm = t0.elapsed();
    let mut per_call_us = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        per_call_us.push(kernel.time_repeat(repeat, method)? * 1e3 / sets as f64);
        repeat += 1;
    }
    let last = repeat - 1;
    let outputs = kernel.timed_outputs()?;
    if outputs.len() != sets {
        return Err(GateError::Abi(format!(
            "{} returned {} timed outputs for {sets} input sets",
            kernel.name(),
            outputs.len()
        )));
    }
    let t_timed = t0.elapsed();
    let checks = verify(&outputs, pool, last);
    if checks.iter().all(|c| c.failure.is_none()) {
        kernel.timing_verified();
    }
    // EVO_LOG=evo_gates=debug: where a FAST's wall time goes.
    tracing::debug!(
        kernel = kernel.name(),
        %problem,
        sets,
        warmup_repeats = repeat as u32 - repeats,
        repeats,
        prepare_ms = t_prepare.as_secs_f64() * 1e3,
        warmup_ms = (t_warm - t_prepare).as_secs_f64() * 1e3,
        timed_and_download_ms = (t_timed - t_warm).as_secs_f64() * 1e3,
        verify_ms = (t0.elapsed() - t_timed).as_secs_f64() * 1e3,
        "FAST"
    );
    Ok(Fast {
        timing: summarize(&problem, &per_call_us, sets as u32, method),
        checks,
    })
}

/// Checks each set's output of the last repeat against the reference of the inputs
/// it held (pool entry [`pool_index`]`(set, last, pool.len())`), in parallel.
pub fn verify(
    outputs: &[Output],
    pool: &[Arc<(Inputs, Reference)>],
    last: usize,
) -> Vec<LaunchCheck> {
    outputs
        .par_iter()
        .enumerate()
        .map(|(set, out)| {
            let entry = &pool[pool_index(set, last, pool.len())];
            judge(&entry.0, out, &entry.1)
        })
        .collect()
}

/// Median, min and max of per-call times; TFLOP/s at the median.
pub fn summarize(
    problem: &Problem,
    per_call_us: &[f64],
    calls: u32,
    method: TimingMethod,
) -> Timing {
    let mut sorted = per_call_us.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Timing {
        problem: *problem,
        median_us: median,
        min_us: sorted.first().copied().unwrap_or(f64::NAN),
        max_us: sorted.last().copied().unwrap_or(f64::NAN),
        repeats: n as u32,
        launches_per_repeat: calls,
        method: method.label().to_string(),
        tflops: problem.flops() / (median * 1e-6) / 1e12,
    }
}

/// The objective over several timings: the geometric mean of the medians (one shape:
/// its median). A suite's score then weighs a 10% gain on any shape the same.
pub fn geometric_mean_us(timings: &[Timing]) -> Option<f64> {
    if timings.is_empty()
        || timings
            .iter()
            .any(|t| t.median_us.is_nan() || t.median_us <= 0.0)
    {
        return None;
    }
    let log_sum: f64 = timings.iter().map(|t| t.median_us.ln()).sum();
    Some((log_sum / timings.len() as f64).exp())
}

/// True when `new_us` beats `best_us` by more than `factor` (e.g. 0.7: 30% faster),
/// the point at which a caller should re-time in isolation before believing it.
pub fn is_suspicious(new_us: f64, best_us: f64, factor: f64) -> bool {
    new_us < best_us * factor
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_genome::{Dtype, HeadDim};

    #[test]
    fn small_inputs_rotate_enough_sets_to_overflow_l2_twice() {
        let seed = Problem::seed();
        assert_eq!(io_bytes(&seed), 2 * 1024 * 1024);
        assert_eq!(input_sets(&seed), 50);
        let big = Problem {
            batch: 2,
            heads: 16,
            q_len: 4096,
            kv_len: 4096,
            head_dim: HeadDim::D128,
            dtype: Dtype::F16,
            causal: false,
        };
        assert_eq!(input_sets(&big), 1);
    }

    #[test]
    fn summary_takes_the_median_and_the_flops_of_the_problem() {
        let p = Problem::seed();
        let t = summarize(&p, &[3.0, 1.0, 2.0, 10.0, 2.5], 100, TimingMethod::Graph);
        assert_eq!((t.median_us, t.min_us, t.max_us), (2.5, 1.0, 10.0));
        assert_eq!(t.method, "graph");
        let expected = 4.0 * 8.0 * 512.0 * 512.0 * 64.0 / 2.5e-6 / 1e12;
        assert!((t.tflops - expected).abs() < 1e-9);
        let even = summarize(&p, &[4.0, 1.0, 2.0, 3.0], 1, TimingMethod::Events);
        assert_eq!(even.median_us, 2.5);
    }

    #[test]
    fn geometric_mean_and_suspicion() {
        let p = Problem::seed();
        let a = summarize(&p, &[2.0], 1, TimingMethod::Events);
        let b = summarize(&p, &[8.0], 1, TimingMethod::Events);
        assert!((geometric_mean_us(&[a, b]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geometric_mean_us(&[]), None);
        assert!(is_suspicious(5.0, 10.0, 0.7));
        assert!(!is_suspicious(9.0, 10.0, 0.7));
    }
}
