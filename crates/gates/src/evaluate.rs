//! One kernel, start to finish: GREEN over a suite, FAST over the objective (whose
//! timed launches are themselves checked, see [`crate::fast`]), and the
//! [`Evaluation`] record the search stores.
//!
//! A kernel that behaves during GREEN's launches and then stops computing (a
//! device-side launch counter, a peek at O, a memo by pointer or by content, work done
//! ahead for another launch) fails FAST's verification or finds nothing to skip, so no
//! timing of a kernel that stopped doing the work is recorded.

use crate::error::GateError;
use crate::fast::{geometric_mean_us, time_problem, FastOptions};
use crate::green::{run_green_cached, GreenCache, GreenOptions, LaunchCheck};
use crate::kernel::AttentionKernel;
use crate::outcome::Timing;
use crate::outcome::{Evaluation, Resources, Status};
use crate::suite::Case;
use evo_genome::{Genome, Problem};

#[derive(Debug, Clone, Copy)]
pub struct EvalOptions {
    pub seed: u64,
    pub fast: FastOptions,
}

/// Evaluates `kernel` (the compiled `genome`): never fails, every failure is a status.
/// `cache` holds GREEN's inputs and references; keep one per process and seed so the
/// CPU reference is computed once, not once per candidate.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    kernel: &mut dyn AttentionKernel,
    genome: &Genome,
    device: &str,
    resources: Option<Resources>,
    green_cases: &[Case],
    objective: &[Problem],
    options: &EvalOptions,
    cache: &mut GreenCache,
) -> Evaluation {
    let fail = |status, detail: String| Evaluation {
        resources,
        ..Evaluation::failed(*genome, device, status, detail)
    };
    // A fault, a launch error or a broken ABI is the kernel's; a reference error would
    // be the gates', but it cannot be told apart from here, so both are recorded.
    let runtime = |e: GateError| fail(Status::RuntimeFailed, e.to_string());
    let t0 = std::time::Instant::now();
    let green = match run_green_cached(
        kernel,
        green_cases,
        GreenOptions {
            seed: options.seed,
            stop_at_first_failure: true,
        },
        cache,
    ) {
        Ok(r) => r,
        Err(e) => return runtime(e),
    };
    tracing::debug!(
        kernel = kernel.name(),
        cases = green_cases.len(),
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "GREEN"
    );
    if !green.passed() {
        return fail(Status::GreenFailed, green.failures());
    }
    let drawn = green_cases.iter().filter(|c| c.drawn).count();
    let mut gates = vec![format!(
        "GREEN {} fixed + {drawn} drawn cases (seed {})",
        green_cases.len() - drawn,
        options.seed
    )];
    let mut timings = Vec::with_capacity(objective.len());
    for problem in objective {
        match time_and_recheck(kernel, problem, options) {
            Ok((timing, check, summary)) => {
                gates.push(summary);
                if let Some(f) = check.failure {
                    return fail(
                        Status::GreenFailed,
                        format!("passed GREEN but failed on {problem}: {f}"),
                    );
                }
                timings.push(timing);
            }
            Err(e) => return runtime(e),
        }
    }
    passed(genome, device, resources, timings, gates)
}

/// The evaluation of a kernel that passed every gate, forward or backward: its score is
/// the geometric mean of its timings' medians.
pub(crate) fn passed(
    genome: &Genome,
    device: &str,
    resources: Option<Resources>,
    timings: Vec<Timing>,
    gates: Vec<String>,
) -> Evaluation {
    Evaluation {
        genome_id: genome.id(),
        genome: *genome,
        device: device.to_string(),
        device_index: None,
        status: Status::Ok,
        score_us: geometric_mean_us(&timings),
        timings,
        resources,
        detail: String::new(),
        gates,
    }
}

/// FAST on one problem with its verification: the timing, one check (failing when any
/// checked launch was wrong, its reason then naming FAST's verification, else the
/// worst one) and the line that says what was checked.
pub fn time_and_recheck(
    kernel: &mut dyn AttentionKernel,
    problem: &Problem,
    options: &EvalOptions,
) -> Result<(Timing, LaunchCheck, String), GateError> {
    let fast = time_problem(kernel, problem, &options.fast)?;
    let mut check = fast
        .worst()
        .ok_or_else(|| GateError::Abi(format!("{}: FAST checked no launch", kernel.name())))?;
    check.failure = fast.failure();
    Ok((fast.timing.clone(), check, fast.summary()))
}
