//! One kernel, start to finish: GREEN over a suite, FAST over the objective (whose
//! timed launches are themselves checked, see [`crate::fast`]), and the
//! [`Evaluation`] record the search stores.
//!
//! A kernel that behaves during GREEN's launches and then stops computing (a
//! device-side launch counter, a peek at O, a memo by pointer) fails FAST's
//! verification, so no timing of a kernel that stopped doing the work is recorded.

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
    for (n, problem) in objective.iter().enumerate() {
        match time_and_recheck(kernel, problem, n, options, cache) {
            Ok((timing, check)) => {
                gates.push(format!(
                    "FAST verified: {} timed sets of {problem}",
                    timing.launches_per_repeat
                ));
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

/// FAST on the `n`-th objective problem with its verification: the timing and one
/// check, failing when any timed set was wrong (its reason then names FAST's
/// verification), else the worst set's. The pool comes from `cache`, so every kernel
/// of a run is timed on the same data and the large shapes are drawn once.
pub fn time_and_recheck(
    kernel: &mut dyn AttentionKernel,
    problem: &Problem,
    n: usize,
    options: &EvalOptions,
    cache: &mut GreenCache,
) -> Result<(Timing, LaunchCheck), GateError> {
    let pool = cache.pool(options.seed, n, problem)?;
    let fast = time_problem(kernel, &pool, &options.fast)?;
    let mut check = fast
        .worst()
        .ok_or_else(|| GateError::Abi(format!("{}: FAST checked no set", kernel.name())))?;
    check.failure = fast.failure();
    Ok((fast.timing, check))
}
