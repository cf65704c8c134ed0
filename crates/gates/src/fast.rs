//! FAST: how fast is it, and did the timed launches compute? Only ever run on kernels
//! that passed GREEN.
//!
//! The problem has `sets` resident input slots per tensor (enough to overflow L2
//! twice, so the numbers are not L2-resident best cases) and as many outputs. Every
//! repeat, outside the timed region, draws new inputs into every slot on the device
//! (the counter-based generator of [`crate::philox`], keyed per launch from a secret
//! nonce drawn from the OS for each FAST), poisons every O and the workspace, and pairs
//! the slots anew: launch `i` computes on Q slot `σ(i)`, K slot `τ(i)`, V slot `π(i)`
//! into O slot `ρ(i)`, four independent permutations. So:
//! - no timed launch meets inputs any earlier launch of the kernel met: a kernel that
//!   memoizes its outputs by input content (or by buffer address, or that peeks at O)
//!   finds nothing to reuse and is timed doing the work;
//! - no launch can tell from its own arguments which inputs another launch of the
//!   repeat will get: a kernel that computes other launches' outputs ahead (to fill
//!   the GPU with two problems at once) computes them on the wrong inputs.
//!
//! Then it checks, every row, against a reference the device computes in fp32 from
//! the draw's seed ([`AttentionKernel::check_timed`]): every launch of the last repeat,
//! every launch of one earlier repeat chosen at random before the timing (every repeat
//! copies its outputs aside alike, so none looks chosen), and one launch chosen at
//! random after each other repeat. A kernel that skips work on the repeats it guesses
//! are not judged is caught on the spot checks. The device reference is itself held
//! to candle's on sampled rows of two checked launches ([`crate::verify::cross_check`]).
//!
//! Repeats whose launches are shorter than [`FastOptions::graph_below_us`] each are
//! a captured CUDA graph replayed between the events (host launch gaps would
//! otherwise be timed as kernel time); its launches are re-pointed every repeat, and
//! L2 is read over between the draw and the timed launches (graph or not), so that they
//! do not start on the inputs just drawn (the SDPA baselines rotate among sets drawn
//! long before: run R6 of experiments/2026-11-25-h100-record found the seed shape's
//! figure ~4% under the same kernel's through the export, timed as SDPA is). Read, not
//! written: a write pass leaves L2 full of dirty lines whose write-back lands in the
//! timed launches (`device::launch::L2Flush`).

use crate::error::GateError;
use crate::green::LaunchCheck;
use crate::inputs::Inputs;
use crate::kernel::{AttentionKernel, CheckRequest, Draw, RepeatPlan, RowCheck, TimingMethod};
use crate::outcome::Timing;
use crate::reference::{cross_check_rows, reference_at};
use crate::verify::{cross_check, reference_row_indices, verdict};
use evo_genome::Problem;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
    /// The key of every draw, permutation and choice of checked launches. `None` (every
    /// real run): drawn from the OS for each FAST, so nothing a kernel can know ahead
    /// predicts its inputs; it is recorded with the timing. Tests fix it.
    pub nonce: Option<u64>,
    /// Time every launch alone on a cold L2 ([`TimingMethod::ColdL2`]) instead of
    /// back to back: the figure beside the usual one where a library is compared.
    pub cold_l2: bool,
}

impl Default for FastOptions {
    fn default() -> Self {
        FastOptions {
            repeats: 20,
            warmup_ms: 25.0,
            graph_below_us: 200.0,
            budget_ms: 4000.0,
            nonce: None,
            cold_l2: false,
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

/// One checked launch of the timed repeats.
#[derive(Debug, Clone)]
pub struct TimedCheck {
    /// Which timed repeat (from 0) and which launch of it.
    pub repeat: usize,
    pub launch: usize,
    pub check: LaunchCheck,
}

/// What FAST measured and what the checked launches produced.
#[derive(Debug, Clone)]
pub struct Fast {
    pub timing: Timing,
    pub checks: Vec<TimedCheck>,
    /// The key the draws came from (reproduces them with `FastOptions::nonce`).
    pub nonce: u64,
    /// Launches timed in all (repeats × sets).
    pub timed_launches: usize,
}

impl Fast {
    /// The first failing launch's reason, naming the check; `None` when all passed.
    pub fn failure(&self) -> Option<String> {
        let failed = self
            .checks
            .iter()
            .filter(|c| c.check.failure.is_some())
            .count();
        self.checks.iter().find_map(|c| {
            c.check.failure.as_ref().map(|f| {
                format!(
                    "FAST verification (timed launches chosen after the fact, every row \
                     against the device reference): {failed} of {} checked launches wrong \
                     ({} timed), first repeat {} launch {} (input seed {}): {f}",
                    self.checks.len(),
                    self.timed_launches,
                    c.repeat,
                    c.launch,
                    c.check.input_seed
                )
            })
        })
    }

    /// The worst check (a failing one first), for records that keep one.
    pub fn worst(&self) -> Option<LaunchCheck> {
        self.checks
            .iter()
            .map(|c| &c.check)
            .find(|c| c.failure.is_some())
            .or_else(|| {
                self.checks
                    .iter()
                    .map(|c| &c.check)
                    .max_by(|a, b| a.rel_frob.total_cmp(&b.rel_frob))
            })
            .cloned()
    }

    /// One line for a record: what was timed and what was checked.
    pub fn summary(&self) -> String {
        format!(
            "FAST verified: {} of {} timed launches of {} checked row by row (draws keyed \
             by nonce {:#018x})",
            self.checks.len(),
            self.timed_launches,
            self.timing.problem,
            self.nonce
        )
    }
}

/// Draws each repeat's launches: a fresh seed per launch and four independent slot
/// permutations, all from one ChaCha stream keyed by the nonce (the host's alone).
struct Planner {
    rng: ChaCha8Rng,
    sets: usize,
}

impl Planner {
    fn next(&mut self) -> Vec<Draw> {
        let perm = |rng: &mut ChaCha8Rng| {
            let mut p: Vec<usize> = (0..self.sets).collect();
            p.shuffle(rng);
            p
        };
        let (q, k, v, o) = (
            perm(&mut self.rng),
            perm(&mut self.rng),
            perm(&mut self.rng),
            perm(&mut self.rng),
        );
        (0..self.sets)
            .map(|i| Draw {
                seed: self.rng.random(),
                q: q[i],
                k: k[i],
                v: v[i],
                o: o[i],
            })
            .collect()
    }
}

/// Times `kernel` on `problem` and checks launches of the timed repeats.
pub fn time_problem(
    kernel: &mut dyn AttentionKernel,
    problem: &Problem,
    options: &FastOptions,
) -> Result<Fast, GateError> {
    let sets = input_sets(problem);
    let nonce = options.nonce.unwrap_or_else(rand::random);
    let mut planner = Planner {
        rng: ChaCha8Rng::seed_from_u64(nonce),
        sets,
    };
    let t0 = std::time::Instant::now();
    kernel.prepare_timing(problem, sets)?;
    let t_prepare = t0.elapsed();
    let run = |kernel: &mut dyn AttentionKernel,
               planner: &mut Planner,
               keep: bool,
               method: TimingMethod|
     -> Result<(f64, Vec<Draw>), GateError> {
        let draws = planner.next();
        let ms = kernel.time_repeat(
            &RepeatPlan {
                draws: &draws,
                keep,
            },
            method,
        )?;
        Ok((ms, draws))
    };

    // Warm-up (module load, first touch, clocks ramping): repeats until warmup_ms
    // has passed on the device.
    let (mut warm, mut spent) = (0u32, 0.0);
    while spent < options.warmup_ms && warm < 1000 {
        spent += run(kernel, &mut planner, false, TimingMethod::Events)?.0;
        warm += 1;
    }
    // Events around host launches include the host's launch gaps (a few µs per
    // kernel), so a launch is sized by a graph replay: device time only. A kernel (or
    // library) that cannot be captured is timed with events, and the timing says so.
    let warm_us = spent / warm as f64 * 1e3 / sets as f64;
    let mut method = TimingMethod::Events;
    let mut repeat_ms = spent / warm as f64;
    if options.cold_l2 {
        method = TimingMethod::ColdL2;
    } else if warm_us < options.graph_below_us.max(1000.0) {
        let graphed = run(kernel, &mut planner, false, TimingMethod::Graph)
            .and_then(|_| run(kernel, &mut planner, false, TimingMethod::Graph));
        warm += 2;
        if let Ok((ms, _)) = graphed {
            if ms * 1e3 / (sets as f64) < options.graph_below_us {
                method = TimingMethod::Graph;
                repeat_ms = ms;
            }
        }
    }
    let repeats = options
        .repeats
        .min(((options.budget_ms / repeat_ms.max(1e-6)) as u32).max(3))
        .max(2) as usize;
    let t_warm = t0.elapsed();

    // Chosen before the timing, out of the kernel's sight: the earlier repeat checked
    // in full.
    let kept = planner.rng.random_range(0..repeats - 1);
    let mut per_call_us = Vec::with_capacity(repeats);
    let mut checked: Vec<(usize, usize, Draw, RowCheck)> = Vec::new();
    let mut kept_draws = Vec::new();
    let mut last_draws = Vec::new();
    for t in 0..repeats {
        let (ms, draws) = run(kernel, &mut planner, t == kept, method)?;
        per_call_us.push(ms * 1e3 / sets as f64);
        if t == kept {
            kept_draws = draws;
        } else if t + 1 == repeats {
            last_draws = draws;
        } else {
            let i = planner.rng.random_range(0..sets);
            let request = CheckRequest {
                draw: draws[i],
                archived: false,
                reference_rows: Vec::new(),
            };
            let found = one(kernel.check_timed(std::slice::from_ref(&request))?)?;
            checked.push((t, i, draws[i], found));
        }
    }
    let t_timed = t0.elapsed();

    // Every launch of the last repeat (live) and of the kept one (archived); one launch
    // of each, chosen at random, also brings back the reference's rows for candle.
    let mut cross = Vec::new();
    for (t, draws, archived) in [(repeats - 1, &last_draws, false), (kept, &kept_draws, true)] {
        let pick = planner.rng.random_range(0..sets);
        let per_head = cross_check_rows(problem, draws[pick].seed);
        let lq = problem.q_len;
        let requests: Vec<CheckRequest> = draws
            .iter()
            .enumerate()
            .map(|(i, d)| CheckRequest {
                draw: *d,
                archived,
                reference_rows: if i == pick {
                    per_head
                        .iter()
                        .enumerate()
                        .flat_map(|(bh, rs)| rs.iter().map(move |&r| bh as u32 * lq + r))
                        .collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        let found = kernel.check_timed(&requests)?;
        if found.len() != requests.len() {
            return Err(GateError::Abi(format!(
                "{}: {} checks for {} requests",
                kernel.name(),
                found.len(),
                requests.len()
            )));
        }
        for (i, (d, f)) in draws.iter().zip(found).enumerate() {
            if i == pick {
                cross.push((*d, f.reference_at.clone(), per_head.clone()));
            }
            checked.push((t, i, *d, f));
        }
    }
    // The device reference against candle's, on the rows brought back.
    for (draw, device_rows, per_head) in &cross {
        let heads: Vec<usize> = (0..per_head.len())
            .filter(|&bh| !per_head[bh].is_empty())
            .collect();
        let inputs = Inputs::random_heads(problem, draw.seed, 1.0, &heads);
        let cpu = reference_at(&inputs, |bh| per_head[bh].clone())?;
        debug_assert_eq!(
            reference_row_indices(problem, &cpu).len() * problem.head_dim.get() as usize,
            device_rows.len()
        );
        cross_check(problem, device_rows, &cpu)?;
    }
    checked.sort_by_key(|c| (c.0, c.1));
    let checks: Vec<TimedCheck> = checked
        .into_iter()
        .map(|(repeat, launch, draw, found)| TimedCheck {
            repeat,
            launch,
            check: verdict(problem, draw.seed, &found.stats, &found.findings, 0.0),
        })
        .collect();
    if checks.iter().all(|c| c.check.failure.is_none()) {
        kernel.timing_verified();
    }
    // EVO_LOG=evo_gates=debug: where a FAST's wall time goes.
    tracing::debug!(
        kernel = kernel.name(),
        %problem,
        sets,
        warmup_repeats = warm,
        repeats,
        checked = checks.len(),
        prepare_ms = t_prepare.as_secs_f64() * 1e3,
        warmup_ms = (t_warm - t_prepare).as_secs_f64() * 1e3,
        timed_ms = (t_timed - t_warm).as_secs_f64() * 1e3,
        verify_ms = (t0.elapsed() - t_timed).as_secs_f64() * 1e3,
        "FAST"
    );
    Ok(Fast {
        timing: summarize(problem, &per_call_us, sets as u32, method),
        checks,
        nonce,
        timed_launches: repeats * sets,
    })
}

fn one(mut found: Vec<RowCheck>) -> Result<RowCheck, GateError> {
    match (found.pop(), found.is_empty()) {
        (Some(f), true) => Ok(f),
        _ => Err(GateError::Abi(
            "one check asked for, another number came back".into(),
        )),
    }
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
            ..Problem::seed()
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
