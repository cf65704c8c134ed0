//! One kernel, start to finish: GREEN over a suite, FAST over the objective, a
//! re-check after timing, and the [`Evaluation`] record the search stores.
//!
//! The re-check after timing runs the timed variant once more on fresh inputs into a
//! poisoned output: a kernel that behaves during GREEN's two launches per case and
//! then stops computing (a device-side launch counter, say) fails it, so FAST never
//! times a kernel that has stopped doing the work.

use crate::error::GateError;
use crate::fast::{geometric_mean_us, time_problem, FastOptions};
use crate::green::{check_once, run_green, GreenOptions};
use crate::inputs::{launch_seed, Inputs};
use crate::kernel::AttentionKernel;
use crate::outcome::{Evaluation, Resources, Status};
use crate::suite::Case;
use evo_genome::{Genome, Problem};

#[derive(Debug, Clone, Copy)]
pub struct EvalOptions {
    pub seed: u64,
    pub fast: FastOptions,
}

/// Evaluates `kernel` (the compiled `genome`): never fails, every failure is a status.
pub fn evaluate(
    kernel: &mut dyn AttentionKernel,
    genome: &Genome,
    device: &str,
    resources: Option<Resources>,
    green_cases: &[Case],
    objective: &[Problem],
    options: &EvalOptions,
) -> Evaluation {
    let fail = |status, detail: String| Evaluation {
        resources,
        ..Evaluation::failed(*genome, device, status, detail)
    };
    // A fault, a launch error or a broken ABI is the kernel's; a reference error would
    // be the gates', but it cannot be told apart from here, so both are recorded.
    let runtime = |e: GateError| fail(Status::RuntimeFailed, e.to_string());
    let green = match run_green(
        kernel,
        green_cases,
        GreenOptions {
            seed: options.seed,
            stop_at_first_failure: true,
        },
    ) {
        Ok(r) => r,
        Err(e) => return runtime(e),
    };
    if !green.passed() {
        return fail(Status::GreenFailed, green.failures());
    }
    let mut timings = Vec::with_capacity(objective.len());
    for (n, problem) in objective.iter().enumerate() {
        let timing = match time_problem(
            kernel,
            problem,
            launch_seed(options.seed, 1000 + n, 0),
            &options.fast,
        ) {
            Ok(t) => t,
            Err(e) => return runtime(e),
        };
        let recheck = Inputs::random(problem, launch_seed(options.seed, 2000 + n, 0), 1.0);
        match check_once(kernel, &recheck) {
            Ok(c) if c.failure.is_none() => {}
            Ok(c) => {
                return fail(
                    Status::GreenFailed,
                    format!(
                        "passed GREEN but failed the re-check after timing on {problem}: {}",
                        c.failure.unwrap_or_default()
                    ),
                )
            }
            Err(e) => return runtime(e),
        }
        timings.push(timing);
    }
    Evaluation {
        genome_id: genome.id(),
        genome: *genome,
        device: device.to_string(),
        status: Status::Ok,
        score_us: geometric_mean_us(&timings),
        timings,
        resources,
        detail: String::new(),
    }
}
