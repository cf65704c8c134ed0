//! FAST: how fast is it? Only ever run on kernels that passed GREEN.
//!
//! After a warm-up, each of `repeats` repeats times N back-to-back calls between two
//! events, N chosen so that one repeat lasts at least ~1 ms (event resolution is
//! ~0.5 µs, so a single 10 µs call between events would be mostly noise). Calls
//! shorter than [`FastOptions::graph_below_us`] are captured in a CUDA graph and the
//! graph is replayed instead: host launch gaps (several µs each) would otherwise be
//! timed as kernel time. When the inputs fit in L2 the calls rotate among enough
//! input sets to overflow it twice, so the numbers are not L2-resident best cases.
//!
//! A graph capture records the calls' arguments, so a captured graph is only replayed
//! on the buffers it was captured with; the kernel drops it when its buffers change.

use crate::error::GateError;
use crate::inputs::Inputs;
use crate::kernel::{AttentionKernel, TimingMethod};
use crate::outcome::Timing;
use evo_genome::Problem;

/// H100's L2 (50 MB); the L4's is 48 MB, so one figure serves both targets.
pub const L2_BYTES: u64 = 50 * 1024 * 1024;
/// At most this many input sets (64 seed-shape sets are 128 MB).
pub const MAX_INPUT_SETS: usize = 64;
/// Most calls one repeat (or one captured graph) holds.
pub const MAX_CALLS_PER_REPEAT: u32 = 4096;

#[derive(Debug, Clone, Copy)]
pub struct FastOptions {
    pub repeats: u32,
    /// Shortest duration of one repeat, milliseconds.
    pub min_repeat_ms: f64,
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
            min_repeat_ms: 1.0,
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

/// Times `kernel` on `inputs.problem` (the inputs copied into each rotated set).
pub fn time_problem(
    kernel: &mut dyn AttentionKernel,
    inputs: &Inputs,
    options: &FastOptions,
) -> Result<Timing, GateError> {
    let problem = &inputs.problem;
    kernel.prepare_timing(inputs, input_sets(problem))?;

    // Warm-up: single calls until warmup_ms has passed on the device.
    let mut spent = 0.0;
    let mut warm_calls = 0;
    while spent < options.warmup_ms && warm_calls < 1000 {
        spent += kernel.time_calls(1, TimingMethod::Events)?;
        warm_calls += 1;
    }
    // Events around host launches include the host's launch gaps (a few µs per kernel,
    // far more per cuBLAS call), so a call is sized by replaying a graph of 10 calls:
    // device time only. A call over 1 ms in the warm-up is already device-bound and is
    // timed with events; so is a kernel (or library) that cannot be captured, and the
    // timing says which method it got.
    let warm_ms = spent / warm_calls as f64;
    let mut method = TimingMethod::Events;
    let mut estimate_ms = warm_ms;
    if warm_ms < 1.0 {
        let graphed = kernel
            .time_calls(10, TimingMethod::Graph)
            .and_then(|_| kernel.time_calls(10, TimingMethod::Graph));
        match graphed {
            Ok(ms) if ms / 10.0 * 1e3 < options.graph_below_us => {
                method = TimingMethod::Graph;
                estimate_ms = ms / 10.0;
            }
            _ => estimate_ms = kernel.time_calls(10, TimingMethod::Events)? / 10.0,
        }
    }
    let mut calls = ((options.min_repeat_ms / estimate_ms.max(1e-6)).ceil() as u32)
        .clamp(1, MAX_CALLS_PER_REPEAT);
    let repeat_ms = loop {
        let ms = kernel.time_calls(calls, method)?;
        if ms >= options.min_repeat_ms || calls == MAX_CALLS_PER_REPEAT {
            break ms;
        }
        let scaled = (calls as f64 * options.min_repeat_ms / ms.max(1e-6) * 1.1).ceil() as u32;
        calls = scaled.clamp(calls + 1, MAX_CALLS_PER_REPEAT);
    };
    let repeats = options
        .repeats
        .min(((options.budget_ms / repeat_ms.max(1e-6)) as u32).max(3));
    let mut per_call_us = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        per_call_us.push(kernel.time_calls(calls, method)? * 1e3 / calls as f64);
    }
    Ok(summarize(problem, &per_call_us, calls, method))
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
