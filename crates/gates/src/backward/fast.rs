//! FAST for the backward: the forward's method (kernels/ABI.md, "Guarantees the gate
//! checks") on the backward's inputs.
//!
//! - Every timed call gets its own inputs, drawn on the device before its repeat from a
//!   seed the run draws from a fresh generator (Q, K, V as the forward's, dO and O on
//!   Philox streams of their own, lse drawn on the host in the range training gives:
//!   [`crate::device::timing_lse`]); no call sees inputs an earlier one saw, so nothing
//!   can be kept from one call to the next.
//! - Warm: a repeat's calls back to back between two events. Cold: L2 read over before
//!   each call, each call between its own events (the figure to set beside a library
//!   timed one call at a time).
//! - The cold pass of a repeat gets inputs of its own, not the warm pass's again.
//! - Every guard is checked after every pass, and every call of the last repeat (both
//!   passes) is checked after the fact against the CPU reference on sampled rows of dQ, dK and dV,
//!   with GREEN's limits: a kernel that skips work while timed fails here. The calls are
//!   checked side by side on the host's cores (each check is one core's work), and the
//!   first that fails is named.
//! - TFLOP/s with FlashAttention's convention: 2.5 times the forward's FLOPs.

use super::green::{judge, BackwardTolerance};
use super::inputs::{BackwardInputs, D_O_STREAM};
use crate::device::{timing_lse, BackwardOutput, LoadedBackward, O_STREAM};
use crate::error::GateError;
use crate::inputs::{draw_stream, Inputs};
use evo_genome::Problem;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// FlashAttention's convention: the backward's FLOPs are 2.5 times the forward's.
pub const BACKWARD_FLOP_FACTOR: f64 = 2.5;

/// Median, min and max of one method's per-call times (µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

impl Spread {
    pub fn of(times: &[f64]) -> Spread {
        let mut t = times.to_vec();
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            t[n / 2]
        } else {
            0.5 * (t[n / 2 - 1] + t[n / 2])
        };
        Spread {
            median_us: median,
            min_us: t.first().copied().unwrap_or(f64::NAN),
            max_us: t.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// One kernel's backward timing on one problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackwardTiming {
    pub kernel: String,
    pub problem: Problem,
    pub warm: Spread,
    pub cold: Spread,
    /// TFLOP/s of the warm and cold medians (2.5x the forward's FLOPs).
    pub tflops_warm: f64,
    pub tflops_cold: f64,
    pub sets: usize,
    pub repeats: usize,
    /// Calls checked against the reference after the timing.
    pub checked: usize,
    pub run_seed: u64,
}

/// The backward's FLOPs of `p`.
pub fn backward_flops(p: &Problem) -> f64 {
    BACKWARD_FLOP_FACTOR * p.flops()
}

/// The inputs a timed call with `seed` ran on, rebuilt on the host.
pub fn timed_inputs(p: &Problem, seed: u64, lse: Vec<f32>) -> BackwardInputs {
    let Inputs { q, k, v, .. } = Inputs::random(p, seed, 1.0);
    BackwardInputs {
        problem: *p,
        seed,
        q_gain: 1.0,
        q,
        k,
        v,
        o: draw_stream(p.dtype, seed, O_STREAM, p.q_elems(), 1.0),
        d_o: draw_stream(p.dtype, seed, D_O_STREAM, p.q_elems(), 1.0),
        lse,
    }
}

/// Times `kernel` on `p` (`repeats` repeats of `sets` calls) and checks every call of
/// the last repeat. An error names the call that failed its check.
pub fn time_backward(
    kernel: &mut LoadedBackward,
    p: &Problem,
    run_seed: u64,
    sets: usize,
    repeats: usize,
) -> Result<BackwardTiming, GateError> {
    let (sets, repeats) = (sets.max(1), repeats.max(2));
    let mut rng = ChaCha8Rng::seed_from_u64(run_seed ^ 0xB4C4_3A2D);
    // Each repeat: the warm pass's seeds, then the cold pass's (fresh inputs for both).
    let seeds: Vec<Vec<u64>> = (0..repeats)
        .map(|_| (0..2 * sets).map(|_| rng.random()).collect())
        .collect();
    let lse_of = |seed: u64| timing_lse(p, seed);
    let t0 = std::time::Instant::now();
    let (times, last) = kernel.time(p, &seeds, &lse_of)?;
    let timed_ms = t0.elapsed().as_secs_f64() * 1e3;
    let tol = BackwardTolerance::for_dtype(p.dtype);
    // The calls are checked on the host side by side (rayon): each rebuilds its inputs
    // and its reference rows alone, and the GPU waits for all of them.
    let checks: Vec<Result<Vec<String>, GateError>> = last
        .par_iter()
        .map(|launch| {
            let inputs = timed_inputs(p, launch.seed, launch.lse.clone());
            let out = BackwardOutput {
                dq: launch.dq.clone(),
                dk: launch.dk.clone(),
                dv: launch.dv.clone(),
                breach: None,
                inputs_changed: None,
            };
            let verdict = judge(&inputs, &out)?;
            Ok(verdict
                .tensors
                .iter()
                .flat_map(|t| t.violations(&tol))
                .collect())
        })
        .collect();
    tracing::debug!(
        kernel = kernel.name(),
        problem = %p,
        timed_ms,
        checked = last.len(),
        check_ms = t0.elapsed().as_secs_f64() * 1e3 - timed_ms,
        "FAST (backward)"
    );
    for (i, check) in checks.into_iter().enumerate() {
        let bad = check?;
        if !bad.is_empty() {
            return Err(GateError::Reference(format!(
                "{} failed the check of timed call {} of the last repeat on {p}: {}",
                kernel.name(),
                i + 1,
                bad.join("; ")
            )));
        }
    }
    let (warm, cold) = (Spread::of(&times.warm_us), Spread::of(&times.cold_us));
    let tf = |us: f64| backward_flops(p) / (us * 1e-6) / 1e12;
    Ok(BackwardTiming {
        kernel: kernel.name().to_string(),
        problem: *p,
        tflops_warm: tf(warm.median_us),
        tflops_cold: tf(cold.median_us),
        warm,
        cold,
        sets,
        repeats,
        checked: last.len(),
        run_seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_median_min_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median_us, s.min_us, s.max_us), (2.5, 1.0, 10.0));
        assert_eq!(Spread::of(&[4.0]).median_us, 4.0);
    }

    #[test]
    fn backward_flops_are_two_and_a_half_forwards() {
        let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
        assert_eq!(backward_flops(&p), 2.5 * 4.0 * 8.0 * 512.0 * 512.0 * 64.0);
    }

    #[test]
    fn a_timed_calls_inputs_rebuild_from_its_seed() {
        let p: Problem = "1,2,9,13,64,bf16,kv=1".parse().unwrap();
        let a = timed_inputs(&p, 5, timing_lse(&p, 5));
        let b = timed_inputs(&p, 5, timing_lse(&p, 5));
        assert_eq!((a.q.clone(), a.o.clone(), a.d_o.clone()), (b.q, b.o, b.d_o));
        assert_ne!(a.o, a.d_o, "O and dO are distinct streams");
        a.check_sizes().unwrap();
    }
}
