//! One backward kernel, start to finish, as a search records it: GREEN's backward
//! checks over the suite (stopping at the first failure), FAST's backward timing of each
//! objective problem (its timed calls checked after the fact), and the [`Evaluation`].
//! The record is the forward's: a search, its cache, its lineage and `evo champions`
//! read a backward evaluation as they read a forward one.

use super::fast::time_backward;
use super::green::{run_backward_green, BackwardReferences, BackwardVariants};
use crate::outcome::{Evaluation, Resources, Status, Timing};
use crate::suite::Case;
use evo_genome::{Genome, Problem};

/// Calls per repeat and repeats of a search's backward timing (`evo gate` times more).
pub const SEARCH_SETS: usize = 4;
pub const SEARCH_REPEATS: usize = 5;

/// Evaluates `kernel` (the compiled backward `genome`); every failure is a status.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_backward(
    kernel: &mut BackwardVariants,
    genome: &Genome,
    device: &str,
    resources: Option<Resources>,
    green_cases: &[Case],
    objective: &[Problem],
    seed: u64,
    references: &mut BackwardReferences,
) -> Evaluation {
    let fail = |status, detail: String| Evaluation {
        resources,
        ..Evaluation::failed(*genome, device, status, detail)
    };
    let t0 = std::time::Instant::now();
    let reports = match run_backward_green(kernel, green_cases, seed, true, references) {
        Ok(r) => r,
        Err(e) => return fail(Status::RuntimeFailed, e.to_string()),
    };
    tracing::debug!(
        cases = green_cases.len(),
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "GREEN (backward)"
    );
    if let Some(bad) = reports.iter().find(|r| !r.passed()) {
        return fail(
            Status::GreenFailed,
            format!("{}: {}", bad.case, bad.failures.join("; ")),
        );
    }
    let drawn = green_cases.iter().filter(|c| c.drawn).count();
    let mut gates = vec![format!(
        "GREEN (backward) {} fixed + {drawn} drawn cases (seed {seed})",
        green_cases.len() - drawn
    )];
    let mut timings = Vec::with_capacity(objective.len());
    for p in objective {
        let Some(k) = kernel.get(p) else {
            return fail(
                Status::RuntimeFailed,
                format!("no variant compiled for {p}"),
            );
        };
        match time_backward(k, p, seed, SEARCH_SETS, SEARCH_REPEATS) {
            Ok(t) => {
                gates.push(format!(
                    "FAST (backward) {p}: {} calls checked, cold {:.1} µs",
                    t.checked, t.cold.median_us
                ));
                timings.push(Timing {
                    problem: *p,
                    median_us: t.warm.median_us,
                    min_us: t.warm.min_us,
                    max_us: t.warm.max_us,
                    repeats: t.repeats as u32,
                    launches_per_repeat: t.sets as u32,
                    method: "events".into(),
                    tflops: t.tflops_warm,
                });
            }
            Err(e) => {
                // A timed call that fails its check is the kernel's fault, like GREEN's.
                let status = if e.to_string().contains("failed the check") {
                    Status::GreenFailed
                } else {
                    Status::RuntimeFailed
                };
                return fail(status, e.to_string());
            }
        }
    }
    crate::evaluate::passed(genome, device, resources, timings, gates)
}
