//! One kernel, start to finish: GREEN over a suite, FAST over the objective, a
//! re-check after timing, and the [`Evaluation`] record the search stores.
//!
//! The re-check after timing runs the timed variant once more on fresh inputs into a
//! poisoned output: a kernel that behaves during GREEN's two launches per case and
//! then stops computing (a device-side launch counter, say) fails it, so FAST never
//! times a kernel that has stopped doing the work.

use crate::error::GateError;
use crate::fast::{geometric_mean_us, time_problem, FastOptions};
use crate::green::{check_against, run_green_cached, GreenCache, GreenOptions, LaunchCheck};
use crate::inputs::launch_seed;
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
    if !green.passed() {
        return fail(Status::GreenFailed, green.failures());
    }
    let mut timings = Vec::with_capacity(objective.len());
    for (n, problem) in objective.iter().enumerate() {
        match time_and_recheck(kernel, problem, n, options, cache) {
            Ok((timing, check)) => {
                if let Some(f) = check.failure {
                    return fail(
                        Status::GreenFailed,
                        format!(
                            "passed GREEN but failed the re-check after timing on {problem}: {f}"
                        ),
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
    }
}

/// FAST on the `n`-th objective problem, then one checked launch on fresh inputs into
/// a poisoned output. Both input sets come from `cache`, so every kernel of a run is
/// timed and re-checked on the same data and the large shapes are drawn once.
pub fn time_and_recheck(
    kernel: &mut dyn AttentionKernel,
    problem: &Problem,
    n: usize,
    options: &EvalOptions,
    cache: &mut GreenCache,
) -> Result<(Timing, LaunchCheck), GateError> {
    let timing_inputs = cache.entry(launch_seed(options.seed, 1000 + n as u64, 0), problem, 1.0)?;
    let timing = time_problem(kernel, &timing_inputs.0, &options.fast)?;
    let recheck = cache.entry(launch_seed(options.seed, 2000 + n as u64, 0), problem, 1.0)?;
    let check = check_against(kernel, &recheck.0, &recheck.1)?;
    Ok((timing, check))
}
