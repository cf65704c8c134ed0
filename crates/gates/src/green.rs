//! GREEN: is the kernel right?
//!
//! For every case of a suite, two launches, each on fresh random inputs from a
//! recorded seed (the second catches a kernel that replays a stale result), each
//! into an output poisoned with NaN. A launch passes when every element was
//! written, none is NaN or Inf, and the relative Frobenius and max abs errors
//! against the reference are within the dtype's [`Tolerance`].
//!
//! The reference is candle's on the CPU for every row of a small case. Above
//! [`FULL_REFERENCE_MACS`] the CPU computes a sample of rows per (b, h), and every row
//! is judged against an fp32 reference the device computes from the launch's seed
//! ([`AttentionKernel::check_last_run`]); the device reference must agree with
//! candle's on the sampled rows ([`crate::verify::cross_check`]), each time.
//!
//! A kernel that writes the forward's log-sum-exp (`evo_lse`) is run once more per case
//! with it asked for, on the first launch's inputs: that launch's O is judged as the
//! others, and its lse by [`crate::lse`]. A genome's plain kernels write none (the lse
//! is a compile-time choice): `evo gate` loads each one's lse twin beside it for that
//! launch ([`crate::lse_twin`]); a search does not, so its GREEN has no lse launch.

use crate::error::GateError;
use crate::inputs::{case_key, launch_seed, poison_bits, to_f32, Inputs};
use crate::kernel::{AttentionKernel, Output};
use crate::lse::{judge_lse, LseCheck};
use crate::reference::{reference, Reference, FULL_REFERENCE_MACS};
use crate::suite::Case;
use crate::tolerance::{Tolerance, Worst};
use crate::verify::{cross_check, reference_row_indices, verdict, Findings, LaunchStats, RowStat};
use evo_genome::Problem;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// Launches per case, each on new inputs.
pub const LAUNCHES_PER_CASE: usize = 2;

#[derive(Debug, Clone, Copy)]
pub struct GreenOptions {
    /// The run seed every launch's input seed derives from (recorded in the report).
    pub seed: u64,
    /// Stop at the first failing case (a search needs only the verdict); `evo gate`
    /// runs them all so the report shows every failing shape.
    pub stop_at_first_failure: bool,
}

/// The outcome of one checked launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchCheck {
    pub input_seed: u64,
    pub rel_frob: f64,
    pub max_abs: f64,
    pub worst: Option<Worst>,
    /// Elements still holding the poison bits.
    pub unwritten: usize,
    /// Written elements that are NaN or ±Inf.
    pub nonfinite: usize,
    /// Query rows compared with the reference (all, or a sample per (b, h)).
    pub rows_checked: usize,
    pub max_abs_score: f32,
    /// Why this launch failed; `None` when it passed.
    pub failure: Option<String>,
}

/// One case: its launches and, if it failed, the first reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    pub case: String,
    pub problem: Problem,
    pub tolerance: Tolerance,
    pub launches: Vec<LaunchCheck>,
    /// The launch with the forward's lse asked for, for a kernel that declares `evo_lse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lse: Option<LseCheck>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.launches.iter().all(|l| l.failure.is_none())
            && self.lse.as_ref().is_none_or(LseCheck::passed)
    }

    /// The first failing launch's reason, prefixed with the case and launch number (the
    /// lse launch last).
    pub fn reason(&self) -> Option<String> {
        let launch = self.launches.iter().enumerate().find_map(|(i, l)| {
            l.failure.as_ref().map(|f| {
                format!(
                    "{}, launch {} of {} (input seed {}): {}",
                    self.case,
                    i + 1,
                    self.launches.len(),
                    l.input_seed,
                    f
                )
            })
        });
        launch.or_else(|| {
            let lse = self.lse.as_ref()?;
            lse.failure().map(|f| {
                format!(
                    "{}, the launch with the lse asked (input seed {}): {f}",
                    self.case, lse.input_seed
                )
            })
        })
    }

    /// Worst relative Frobenius error over the launches.
    pub fn rel_frob(&self) -> f64 {
        self.launches.iter().map(|l| l.rel_frob).fold(0.0, f64::max)
    }

    /// Worst max abs error over the launches.
    pub fn max_abs(&self) -> f64 {
        self.launches.iter().map(|l| l.max_abs).fold(0.0, f64::max)
    }
}

/// GREEN's verdict on one kernel over a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GreenReport {
    pub kernel: String,
    pub seed: u64,
    pub cases: Vec<CaseReport>,
    /// Cases the kernel's ABI cannot state, with the reason (see
    /// [`AttentionKernel::states`]): each ran as its basic form instead, so a kernel
    /// never escapes a case's lengths by declaring the first ABI.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl GreenReport {
    pub fn passed(&self) -> bool {
        !self.cases.is_empty() && self.cases.iter().all(CaseReport::passed)
    }

    /// The reasons of every failing case, one per line.
    pub fn failures(&self) -> String {
        self.cases
            .iter()
            .filter_map(CaseReport::reason)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs GREEN over `cases`.
pub fn run_green(
    kernel: &mut dyn AttentionKernel,
    cases: &[Case],
    options: GreenOptions,
) -> Result<GreenReport, GateError> {
    run_green_cached(kernel, cases, options, &mut GreenCache::default())
}

/// The inputs and CPU references of a run, drawn and computed once and shared by every
/// kernel gated with the same seed (200 genomes x 24 launches would otherwise spend
/// their time in the CPU reference). Each kernel still sees two different input sets
/// per case, and each launch starts from a freshly poisoned output.
#[derive(Default)]
pub struct GreenCache {
    entries: HashMap<(u64, Problem, u32), Arc<(Inputs, Reference)>>,
}

impl GreenCache {
    /// The inputs and reference of launch `launch` of `case` (computed on first use).
    pub fn get(
        &mut self,
        seed: u64,
        case: &Case,
        launch: usize,
    ) -> Result<Arc<(Inputs, Reference)>, GateError> {
        let key = Self::key(seed, case, launch);
        self.entry(key.0, &case.problem, case.q_gain)
    }

    /// Inputs drawn from `input_seed` and their reference (computed on first use).
    pub fn entry(
        &mut self,
        input_seed: u64,
        problem: &Problem,
        q_gain: f32,
    ) -> Result<Arc<(Inputs, Reference)>, GateError> {
        let key = (input_seed, *problem, q_gain.to_bits());
        if let Some(hit) = self.entries.get(&key) {
            return Ok(hit.clone());
        }
        let inputs = Inputs::random(problem, input_seed, q_gain);
        let refs = reference(&inputs)?;
        let entry = Arc::new((inputs, refs));
        self.entries.insert(key, entry.clone());
        Ok(entry)
    }

    fn key(seed: u64, case: &Case, launch: usize) -> (u64, Problem, u32) {
        (
            launch_seed(seed, case_key(&case.label()), launch),
            case.problem,
            case.q_gain.to_bits(),
        )
    }

    /// Computes every launch of `cases` in parallel (rayon) ahead of the GPU work.
    pub fn prepare(&mut self, seed: u64, cases: &[Case]) -> Result<(), GateError> {
        let jobs: Vec<(usize, usize)> = (0..cases.len())
            .flat_map(|n| (0..LAUNCHES_PER_CASE).map(move |l| (n, l)))
            .filter(|&(n, l)| !self.entries.contains_key(&Self::key(seed, &cases[n], l)))
            .collect();
        let computed: Result<Vec<_>, GateError> = jobs
            .par_iter()
            .map(|&(n, l)| {
                let case = &cases[n];
                let key = Self::key(seed, case, l);
                let inputs = Inputs::random(&case.problem, key.0, case.q_gain);
                let refs = reference(&inputs)?;
                Ok((key, Arc::new((inputs, refs))))
            })
            .collect();
        self.entries.extend(computed?);
        Ok(())
    }
}

/// [`run_green`] with a cache shared across kernels.
pub fn run_green_cached(
    kernel: &mut dyn AttentionKernel,
    cases: &[Case],
    options: GreenOptions,
    cache: &mut GreenCache,
) -> Result<GreenReport, GateError> {
    let mut reports = Vec::with_capacity(cases.len());
    let mut skipped = Vec::new();
    for case in cases {
        let basic;
        let case = match kernel.states(&case.problem) {
            Ok(()) => case,
            Err(why) => {
                skipped.push(format!("{}: {why}", case.label()));
                basic = case.basic();
                &basic
            }
        };
        let mut launches = Vec::with_capacity(LAUNCHES_PER_CASE);
        for launch in 0..LAUNCHES_PER_CASE {
            let entry = cache.get(options.seed, case, launch)?;
            kernel.cap_persistent_grid(persistent_grid_of(launch, entry.0.seed));
            let checked = check_against(kernel, &entry.0, &entry.1);
            kernel.cap_persistent_grid(None);
            launches.push(checked?);
        }
        let lse = if kernel.writes_lse(&case.problem) {
            let entry = cache.get(options.seed, case, 0)?;
            Some(check_lse(kernel, &entry.0, &entry.1)?)
        } else {
            None
        };
        let report = CaseReport {
            case: case.label(),
            problem: case.problem,
            tolerance: Tolerance::for_dtype(case.problem.dtype),
            launches,
            lse,
        };
        let failed = !report.passed();
        reports.push(report);
        if failed && options.stop_at_first_failure {
            break;
        }
    }
    Ok(GreenReport {
        kernel: kernel.name().to_string(),
        seed: options.seed,
        cases: reports,
        skipped,
    })
}

/// The grid a persistent kernel gets on launch `launch` of a case: its whole grid on
/// even launches; on odd ones 1 to 3 CTAs (from the launch's input seed), so every CTA
/// loops over several tiles of even a small case. C1-C2 of
/// experiments/2026-11-25-h100-chained: a kernel whose second tile per CTA was wrong
/// passed GREEN on whole grids (one tile per CTA at its shapes) and failed only FAST's
/// re-check at B4 H16 L1024.
pub fn persistent_grid_of(launch: usize, input_seed: u64) -> Option<u32> {
    (launch % 2 == 1).then_some(1 + (input_seed % 3) as u32)
}

/// One launch on `inputs`, checked (the post-timing re-check of FAST uses it too).
pub fn check_once(
    kernel: &mut dyn AttentionKernel,
    inputs: &Inputs,
) -> Result<LaunchCheck, GateError> {
    let refs = reference(inputs)?;
    check_against(kernel, inputs, &refs)
}

/// One launch on `inputs`, checked against a reference computed before: every row of a
/// large case on the device (when the kernel has one), else the CPU reference's rows.
pub fn check_against(
    kernel: &mut dyn AttentionKernel,
    inputs: &Inputs,
    refs: &Reference,
) -> Result<LaunchCheck, GateError> {
    let out = kernel.run_once(inputs)?;
    check_output(kernel, inputs, refs, out)
}

/// One launch with the forward's lse asked for (on the kernel's whole grid), its O
/// checked as [`check_against`] does and its lse by [`judge_lse`].
pub fn check_lse(
    kernel: &mut dyn AttentionKernel,
    inputs: &Inputs,
    refs: &Reference,
) -> Result<LseCheck, GateError> {
    kernel.cap_persistent_grid(None);
    let (out, lse) = kernel.run_once_with_lse(inputs)?;
    Ok(LseCheck {
        input_seed: inputs.seed,
        o: check_output(kernel, inputs, refs, out)?,
        lse: judge_lse(inputs, refs, &lse),
    })
}

/// The checks of the output of the kernel's last launch, on `inputs`.
fn check_output(
    kernel: &mut dyn AttentionKernel,
    inputs: &Inputs,
    refs: &Reference,
    out: Output,
) -> Result<LaunchCheck, GateError> {
    let p = &inputs.problem;
    let expected_len = p.q_elems();
    if out.o.len() != expected_len {
        return Err(GateError::Abi(format!(
            "{} returned {} output elements for {}, expected {expected_len}",
            kernel.name(),
            out.o.len(),
            inputs.problem
        )));
    }
    if p.macs() <= FULL_REFERENCE_MACS {
        return Ok(judge(inputs, &out, refs));
    }
    let rows = reference_row_indices(p, refs);
    match kernel.check_last_run(inputs, &rows)? {
        None => Ok(judge(inputs, &out, refs)),
        Some(found) => {
            cross_check(p, &found.reference_at, refs)?;
            let findings = Findings {
                guard_breach: out.guard_breach.clone(),
                ..found.findings
            };
            Ok(verdict(
                p,
                inputs.seed,
                &found.stats,
                &findings,
                refs.max_abs_score,
            ))
        }
    }
}

/// Applies the checks to an output against the CPU reference's rows (pure: the
/// fake-device tests call it directly). Unwritten and non-finite elements are counted
/// over the whole output; the errors over the reference's rows.
pub fn judge(inputs: &Inputs, output: &Output, refs: &Reference) -> LaunchCheck {
    let out = &output.o;
    let p = &inputs.problem;
    let (lq, d) = (p.q_len as usize, p.head_dim.get() as usize);
    let poison = poison_bits(p.dtype);
    let mut stats = LaunchStats::default();
    for (i, &bits) in out.iter().enumerate() {
        if bits == poison {
            stats.unwritten += 1;
            stats.first_unwritten.get_or_insert(i);
        } else if !to_f32(p.dtype, bits).is_finite() {
            stats.nonfinite += 1;
            stats.first_nonfinite.get_or_insert(i);
        }
    }
    let heads = p.heads as usize;
    for (bh, head) in refs.heads.iter().enumerate() {
        let (b, h) = ((bh / heads) as u32, (bh % heads) as u32);
        for (i, &row) in head.rows.iter().enumerate() {
            let at = (bh * lq + row as usize) * d;
            stats.errors.add_row(
                (b, h, row),
                &out[at..at + d],
                |bits| to_f32(p.dtype, bits),
                &head.out[i * d..(i + 1) * d],
            );
        }
    }
    stats.rows = refs.rows_checked();
    let findings = Findings {
        guard_breach: output.guard_breach.clone(),
        inputs_changed: None,
    };
    verdict(p, inputs.seed, &stats, &findings, refs.max_abs_score)
}

/// Row summaries of `out` against every row of a full `refs` (the CPU side of a
/// device check, for kernels that stand in for one in the tests).
pub fn row_stats(inputs: &Inputs, out: &[u16], refs: &Reference) -> Vec<RowStat> {
    let d = inputs.problem.head_dim.get() as usize;
    let lq = inputs.problem.q_len as usize;
    refs.heads
        .par_iter()
        .enumerate()
        .flat_map_iter(|(bh, head)| {
            head.rows.iter().enumerate().map(move |(i, &row)| {
                let at = (bh * lq + row as usize) * d;
                RowStat::of_row(
                    &out[at..at + d],
                    &head.out[i * d..(i + 1) * d],
                    inputs.problem.dtype,
                )
            })
        })
        .collect()
}
