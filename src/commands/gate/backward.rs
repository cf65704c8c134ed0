//! `evo gate` on backward genomes and hand-written backward modules (`.cu` files that
//! declare `evo_pass`): GREEN's backward checks over the same suite as the forward's,
//! then FAST's backward timing of the kernels that pass. `evo bench --champions DIR
//! --backward` runs the same gates ([`gate_kernels`]) on the table's backward genomes.

use anyhow::Context;
use evo_codegen::Toolchain;
use evo_gates::backward::fast::{time_backward, BackwardTiming};
use evo_gates::backward::green::{
    run_backward_green, BackwardCaseReport, BackwardReferences, BackwardVariants,
};
use evo_gates::compile::{compile_all, variants_for, KernelSource};
use evo_gates::suite::Case;
use evo_gates::Device;
use evo_genome::{Pass, Problem, Target};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Sets (calls per repeat) and repeats of the backward's timing.
const SETS: usize = 8;
const REPEATS: usize = 7;

/// One kernel's backward gate, as the JSON records it.
#[derive(Debug, Serialize)]
struct KernelRecord<'a> {
    kernel: &'a str,
    genome_id: Option<String>,
    device: &'a str,
    run_seed: u64,
    passed: bool,
    cases: &'a [BackwardCaseReport],
    timings: &'a [BackwardTiming],
    /// FAST's failures (a timed call's check, a guard written while timed), one per
    /// timed problem that failed.
    fast_failures: Vec<String>,
    compile_errors: Vec<String>,
}

/// What the backward gate found for one kernel: GREEN's reports, FAST's timings and
/// failures. `evo gate` writes it as JSON; `evo bench --backward` sets it beside PyTorch's.
#[derive(Debug, Clone, Serialize)]
pub struct BackwardOutcome {
    pub kernel: String,
    pub genome_id: Option<String>,
    /// Every variant compiled (or was excluded by the genome's rules), GREEN passed and
    /// FAST found nothing wrong.
    pub passed: bool,
    pub cases: Vec<BackwardCaseReport>,
    /// One per timed problem that has a variant, in the order of `BackwardRun::timed`.
    pub timings: Vec<BackwardTiming>,
    /// The timed problems FAST rejected, each with FAST's error.
    pub fast_failures: Vec<FastFailure>,
    pub compile_errors: Vec<String>,
}

/// A timed problem FAST rejected (a timed call's check, a guard written while timed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FastFailure {
    pub problem: Problem,
    pub error: String,
}

impl BackwardOutcome {
    /// FAST's failures as the gate's JSON and messages state them: `FAST on PROBLEM: ...`.
    pub fn fast_failure_lines(&self) -> Vec<String> {
        self.fast_failures
            .iter()
            .map(|f| format!("FAST on {}: {}", f.problem, f.error))
            .collect()
    }
}

/// What the backward gate needs from `evo gate`'s arguments.
pub struct BackwardRun<'a> {
    pub device: &'a Device,
    pub tc: &'a Toolchain,
    pub target: Target,
    pub seed: u64,
    pub cases: Vec<Case>,
    pub timed: Vec<Problem>,
    pub json: Option<&'a Path>,
}

/// The pass every kernel of the list computes (genomes by their family, `.cu` files by
/// whether they declare `evo_pass`); an error when the list mixes the two, since GREEN's
/// checks and FAST's timing differ between them. An empty list is a forward one.
pub fn pass_of(sources: &[KernelSource]) -> anyhow::Result<Pass> {
    let first_of = |pass: Pass| sources.iter().find(|s| s.pass() == pass);
    match (first_of(Pass::Forward), first_of(Pass::Backward)) {
        (Some(forward), Some(backward)) => {
            let n = sources
                .iter()
                .filter(|s| s.pass() == Pass::Backward)
                .count();
            anyhow::bail!(
                "{n} of the {} kernels are backward (such as {}) and the others forward (such \
                 as {}): gate the backward and the forward kernels in separate runs (their \
                 checks and timings differ)",
                sources.len(),
                backward.name(),
                forward.name()
            )
        }
        (None, Some(_)) => Ok(Pass::Backward),
        _ => Ok(Pass::Forward),
    }
}

/// Gates every backward source: `evo gate`'s backward run. Writes the JSON of every
/// kernel's outcome (`run.json`); an error names the kernels that failed GREEN or FAST.
pub fn run(run: BackwardRun, sources: &[KernelSource]) -> anyhow::Result<()> {
    let outcomes = gate_kernels(&run, sources, &mut std::io::stdout())?;
    if let Some(path) = run.json {
        let out: Vec<KernelRecord> = outcomes
            .iter()
            .map(|o| KernelRecord {
                kernel: &o.kernel,
                genome_id: o.genome_id.clone(),
                device: run.device.name(),
                run_seed: run.seed,
                passed: o.passed,
                cases: &o.cases,
                timings: &o.timings,
                fast_failures: o.fast_failure_lines(),
                compile_errors: o.compile_errors.clone(),
            })
            .collect();
        evo_lineage::write_atomic(path, serde_json::to_string_pretty(&out)?.as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))?;
        eprintln!("wrote {} kernels' records to {}", out.len(), path.display());
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.kernel.as_str())
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} backward kernels failed GREEN or FAST: {}",
            failed.len(),
            sources.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// Compiles every backward source at the variants `run`'s cases and timed problems need,
/// runs GREEN's backward checks on `run.cases`, then FAST's timing (warm and cold L2,
/// every timed call checked) on each of `run.timed` of the kernels that pass. One line
/// per case and per timing goes to `log` (`evo gate`: stdout). The outcomes are in the
/// sources' order; a kernel that fails is an outcome, not an error.
pub fn gate_kernels(
    run: &BackwardRun,
    sources: &[KernelSource],
    log: &mut dyn Write,
) -> anyhow::Result<Vec<BackwardOutcome>> {
    let mut problems: Vec<Problem> = run.cases.iter().map(|c| c.problem).collect();
    problems.extend(&run.timed);
    let variants = variants_for(&problems);
    let built = compile_all(run.tc, sources, &variants, run.target);
    let mut outcomes = Vec::new();
    let mut references = BackwardReferences::default();
    for (source, built) in sources.iter().zip(&built) {
        let name = source.name();
        let mut kernel = BackwardVariants {
            name: name.to_string(),
            variants: Vec::new(),
        };
        let mut compile_errors = Vec::new();
        for v in built {
            match &v.result {
                Ok(c) => {
                    let label = format!("{name} (D{} {})", v.head_dim, v.dtype);
                    kernel.variants.push((
                        (v.head_dim, v.dtype),
                        run.device.load_backward(&label, &c.cubin)?,
                    ));
                }
                // A head dim the genome's rules exclude is skipped, as the forward's gate
                // skips it; anything else that does not compile fails the kernel.
                Err(_) if source.unsupported(v.head_dim, run.target).is_some() => {
                    let why = source
                        .unsupported(v.head_dim, run.target)
                        .unwrap_or_default();
                    eprintln!("{name}: not built at D{} ({why})", v.head_dim);
                }
                Err(e) => compile_errors.push(format!("D{} {}: {e}", v.head_dim, v.dtype)),
            }
        }
        eprintln!("{name}: GREEN (backward) on {} cases", run.cases.len());
        let reports =
            run_backward_green(&mut kernel, &run.cases, run.seed, false, &mut references)?;
        let mut passed = compile_errors.is_empty();
        for r in &reports {
            let [dq, dk, dv] = r.worst_rel_frob();
            let verdict = match (&r.skipped, r.passed()) {
                (Some(why), _) => format!("skipped ({why})"),
                (None, true) => "pass".to_string(),
                (None, false) => {
                    passed = false;
                    format!("FAIL: {}", r.failures.join("; "))
                }
            };
            writeln!(
                log,
                "{name}  {:<44} dQ {dq:.2e}  dK {dk:.2e}  dV {dv:.2e}  {verdict}",
                r.case
            )?;
        }
        for e in &compile_errors {
            writeln!(log, "{name}  compile failed: {e}")?;
        }
        let mut timings = Vec::new();
        let mut fast_failures = Vec::new();
        if passed {
            for p in &run.timed {
                let Some((_, k)) = kernel
                    .variants
                    .iter_mut()
                    .find(|(key, _)| *key == (p.head_dim, p.dtype))
                else {
                    continue;
                };
                // A kernel FAST rejects fails, the run goes on: the outcome records it
                // and the next kernel is gated.
                let t = match time_backward(k, p, run.seed, SETS, REPEATS) {
                    Ok(t) => t,
                    Err(e) => {
                        writeln!(log, "{name}  {p}  FAST FAIL: {e}")?;
                        fast_failures.push(FastFailure {
                            problem: *p,
                            error: e.to_string(),
                        });
                        continue;
                    }
                };
                writeln!(
                    log,
                    "{name}  {p}  backward warm {:.1} µs ({:.1}-{:.1}), {:.0} TFLOP/s; cold {:.1} µs, \
                     {:.0} TFLOP/s; {} timed calls checked",
                    t.warm.median_us,
                    t.warm.min_us,
                    t.warm.max_us,
                    t.tflops_warm,
                    t.cold.median_us,
                    t.tflops_cold,
                    t.checked
                )?;
                timings.push(t);
            }
        }
        outcomes.push(BackwardOutcome {
            kernel: name.to_string(),
            genome_id: source.genome().map(|g| g.id().to_string()),
            passed: passed && fast_failures.is_empty(),
            cases: reports,
            timings,
            fast_failures,
            compile_errors,
        });
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> KernelSource {
        KernelSource::File {
            path: format!("tests/kernels/{name}.cu"),
            text: text.to_string(),
        }
    }

    use evo_genome::Family;

    #[test]
    fn backward_files_go_to_the_backward_gate_and_a_mixed_list_is_refused() {
        let backward = file(
            "bwd_naive",
            "extern \"C\" __constant__ int evo_pass[1] = {1};",
        );
        let forward = file(
            "naive",
            "extern \"C\" __constant__ int evo_geometry[6] = {64};",
        );
        let genome = |family| KernelSource::Genome {
            name: "g".into(),
            genome: evo_genome::Genome {
                family,
                ..evo_genome::Genome::baseline()
            },
        };
        assert_eq!(pass_of(&[]).unwrap(), Pass::Forward);
        assert_eq!(
            pass_of(std::slice::from_ref(&forward)).unwrap(),
            Pass::Forward
        );
        assert_eq!(
            pass_of(&[backward.clone(), genome(Family::AmpereBwd)]).unwrap(),
            Pass::Backward
        );
        for mixed in [
            vec![forward.clone(), backward.clone()],
            vec![genome(Family::Ampere), backward.clone()],
            vec![genome(Family::AmpereBwd), forward.clone()],
        ] {
            let e = pass_of(&mixed).unwrap_err().to_string();
            assert!(e.contains("1 of the 2 kernels are backward"), "{e}");
            assert!(e.contains("separate runs"), "{e}");
        }
    }
}
