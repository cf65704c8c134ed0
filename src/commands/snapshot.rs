//! `evo snapshot FILE --export DIR`: an export's champion outputs on fixed inputs,
//! summarised into FILE; `--check` recomputes them on this machine and compares (the
//! file format, the inputs and the comparison are crates/runtime/src/snapshot/).
//!
//! Recording on one machine and checking on another is the point: a driver update, a
//! new GPU or another evo version that changes a champion's output beyond the
//! tolerance fails the check, with the shape, row and value named.

use anyhow::{bail, Context};
use evo_genome::Problem;
use evo_runtime::snapshot::{
    check, export_problems, record, CheckReport, GpuRunner, Machine, Snapshot, Tolerance,
};
use evo_runtime::Champions;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// The snapshot: written when recording, read with --check.
    pub file: PathBuf,
    /// The export whose champions run (a folder written by `evo export`).
    #[arg(long, value_name = "DIR", env = "EVO_EXPORT_DIR")]
    pub export: PathBuf,
    /// Check FILE here instead of recording it: the same problems on the same inputs,
    /// compared with the recorded outputs; exits non-zero when any is out of tolerance.
    #[arg(long)]
    pub check: bool,
    /// A problem to record (repeatable): B,H,Lq,Lk,D,dtype[,options] as `evo dispatch`
    /// takes it; default: every class of the export in each dtype it was exported for.
    #[arg(long = "problem", value_name = "SPEC", conflicts_with = "check")]
    pub problems: Vec<Problem>,
    /// The seed the inputs are drawn from.
    #[arg(long, default_value_t = 1, conflicts_with = "check")]
    pub seed: u64,
    /// The tolerance a check holds each value to, |O - recorded| <= atol + rtol·|recorded|
    /// (with --rtol); default: GREEN's for the dtype, from the export's manifest.
    #[arg(long, requires = "rtol", conflicts_with = "check")]
    pub atol: Option<f64>,
    /// See --atol.
    #[arg(long, requires = "atol", conflicts_with = "check")]
    pub rtol: Option<f64>,
    /// The GPU to run on (its ordinal).
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Record over FILE when it already exists (by default an existing file is refused:
    /// check it with --check, or record to another path).
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
}

pub fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    if args.check {
        run_check(&args)
    } else {
        run_record(&args)
    }
}

/// Checks FILE before anything runs: a file in an existing folder, outside the export
/// (the next `evo export` replaces that folder whole), and new unless --force; an
/// existing file is named with what it holds.
fn check_destination(args: &SnapshotArgs) -> anyhow::Result<()> {
    let file = &args.file;
    if file.is_dir() {
        bail!("{}: a folder; name the snapshot's file", file.display());
    }
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let (Ok(folder), Ok(export)) = (parent.canonicalize(), args.export.canonicalize()) else {
        if !parent.is_dir() {
            bail!(
                "{}: no such folder for the snapshot {}; create it first",
                parent.display(),
                file.display()
            );
        }
        return Ok(());
    };
    if folder.starts_with(&export) {
        bail!(
            "{}: inside the export it records ({}), which the next `evo export` replaces whole; \
             write the snapshot elsewhere",
            file.display(),
            args.export.display()
        );
    }
    if file.exists() && !args.force {
        let what = match Snapshot::read(file) {
            Ok(s) => format!(
                "a snapshot of {} outputs recorded by evo {} on {}",
                s.entries.len(),
                s.evo_version,
                s.machine.device
            ),
            Err(_) => "not a snapshot".to_string(),
        };
        bail!(
            "{}: exists ({what}); check it with --check, record to another path, or pass --force to record over it",
            file.display()
        );
    }
    Ok(())
}

fn run_record(args: &SnapshotArgs) -> anyhow::Result<()> {
    check_destination(args)?;
    let tolerance = match (args.atol, args.rtol) {
        (Some(atol), Some(rtol)) => {
            if !(atol >= 0.0 && rtol >= 0.0 && atol.is_finite() && rtol.is_finite()) {
                bail!("--atol {atol} --rtol {rtol}: both must be finite and >= 0");
            }
            Some(Tolerance { atol, rtol })
        }
        _ => None,
    };
    let champions = Champions::open(&args.export)?;
    let problems = if args.problems.is_empty() {
        export_problems(champions.export())?
    } else {
        args.problems.clone()
    };
    let gpu = GpuRunner::open(args.gpu)?;
    let snapshot = record(&champions, &gpu, &problems, args.seed, tolerance)?;
    snapshot.write(&args.file)?;
    let bytes = std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0);
    println!(
        "recorded {} outputs of {} (seed {}) on {} in {} ({} KB)",
        snapshot.entries.len(),
        args.export.display(),
        snapshot.seed,
        describe(&snapshot.machine),
        args.file.display(),
        bytes.div_ceil(1024)
    );
    println!(
        "  check it on any machine: evo snapshot {} --export {} --check",
        args.file.display(),
        args.export.display()
    );
    Ok(())
}

fn run_check(args: &SnapshotArgs) -> anyhow::Result<()> {
    let snapshot = Snapshot::read(&args.file)?;
    let champions = Champions::open(&args.export)?;
    let gpu = GpuRunner::open(args.gpu)?;
    let report = check(&snapshot, &champions, &gpu)?;
    println!(
        "{}: recorded by evo {} on {}, seed {}",
        args.file.display(),
        snapshot.evo_version,
        describe(&snapshot.machine),
        snapshot.seed
    );
    println!(
        "checked by evo {} on {}",
        env!("CARGO_PKG_VERSION"),
        describe(&report.machine)
    );
    if report.differences.is_empty() {
        println!("same GPU, drivers, evo and export as the recording");
    } else {
        println!("differs: {}", report.differences.join("; "));
    }
    println!();
    print!("{}", table(&report));
    verdict(&report).with_context(|| format!("{} does not check", args.file.display()))
}

/// `NVIDIA H100 80GB HBM3 (compute capability 9.0, CUDA 13.0, driver 580.159.04)`.
fn describe(m: &Machine) -> String {
    format!(
        "{} (compute capability {}, CUDA {}, driver {})",
        m.device,
        m.compute_capability,
        m.cuda_driver,
        m.nvidia_driver.as_deref().unwrap_or("unknown")
    )
}

/// One line per problem: rows identical, within tolerance and out of it, and the
/// largest error of a sampled value; then the champions that differ from the
/// recording's and the values out of tolerance (at most three per problem).
fn table(report: &CheckReport) -> String {
    let labels: Vec<String> = report.entries.iter().map(|e| e.problem.label()).collect();
    let champions: Vec<String> = report
        .entries
        .iter()
        .map(|e| format!("{} ({})", e.champion.class, e.champion.image))
        .collect();
    let pw = labels.iter().map(String::len).max().unwrap_or(0).max(7);
    let cw = champions.iter().map(String::len).max().unwrap_or(0).max(8);
    let mut out = format!(
        "{:<pw$}  {:<cw$}  {:>7}  {:>9}  {:>8}  {:>7}  {:>11}\n",
        "problem", "champion", "rows", "identical", "within", "out", "max |err|"
    );
    for ((e, label), champion) in report.entries.iter().zip(&labels).zip(&champions) {
        let c = &e.comparison;
        out += &format!(
            "{label:<pw$}  {champion:<cw$}  {:>7}  {:>9}  {:>8}  {:>7}  {:>11.3e}\n",
            c.rows, c.identical_rows, c.within_rows, c.out_rows, c.max_abs_error
        );
    }
    for (e, label) in report.entries.iter().zip(&labels) {
        if !e.champion_differences.is_empty() {
            out += &format!(
                "{label}: another champion than recorded: {}\n",
                e.champion_differences.join(", ")
            );
        }
        for m in e.comparison.mismatches.iter().take(3) {
            out += &format!("{label}: out of tolerance: {}\n", m.describe(&e.problem));
        }
        if e.comparison.mismatches.len() > 3 {
            out += &format!(
                "{label}: ... {} more out of tolerance\n",
                e.comparison.mismatches.len() - 3
            );
        }
    }
    out
}

/// Ok when every output is within tolerance; else an error naming the first problem,
/// row and value out of it.
fn verdict(report: &CheckReport) -> anyhow::Result<()> {
    let failed: Vec<_> = report
        .entries
        .iter()
        .filter(|e| !e.comparison.passed())
        .collect();
    let identical = report
        .entries
        .iter()
        .filter(|e| e.comparison.identical_rows == e.comparison.rows)
        .count();
    let Some(first) = failed.first() else {
        println!(
            "\nall {} outputs within tolerance ({identical} identical bit for bit)",
            report.entries.len()
        );
        return Ok(());
    };
    bail!(
        "{} of {} outputs out of tolerance; the first: {}, {}",
        failed.len(),
        report.entries.len(),
        first.problem.label(),
        first.comparison.mismatches[0].describe(&first.problem)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_runtime::snapshot::{ChampionKernel, Comparison, EntryCheck, Image, Mismatch};

    fn entry(spec: &str, identical: u64, out: Vec<Mismatch>) -> EntryCheck {
        let problem: Problem = spec.parse().unwrap();
        let rows = problem.batch as u64 * problem.heads as u64 * problem.q_len as u64;
        EntryCheck {
            problem,
            champion: ChampionKernel {
                class: "b1-h8-l512-d64".into(),
                genome_id: "c0ae42df049485d5".into(),
                image: Image::Ptx,
            },
            champion_differences: Vec::new(),
            comparison: Comparison {
                rows,
                identical_rows: identical,
                within_rows: rows - identical - if out.is_empty() { 0 } else { 64 },
                out_rows: if out.is_empty() { 0 } else { 64 },
                max_abs_error: 0.0,
                mismatches: out,
            },
        }
    }

    fn report(entries: Vec<EntryCheck>) -> CheckReport {
        CheckReport {
            machine: Machine {
                device: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: "9.0".into(),
                cuda_driver: "13.0".into(),
                nvidia_driver: None,
            },
            differences: Vec::new(),
            entries,
        }
    }

    #[test]
    fn the_table_counts_rows_and_the_verdict_names_the_first_value_out() {
        let passing = report(vec![
            entry("1,8,512,512,64,f16", 4096, vec![]),
            entry("1,8,512,512,64,bf16", 4000, vec![]),
        ]);
        let t = table(&passing);
        assert!(
            t.lines().nth(1).unwrap().starts_with(
                "B1 H8 L512 D64 f16   b1-h8-l512-d64 (PTX)     4096       4096         0        0"
            ),
            "{t}"
        );
        assert!(verdict(&passing).is_ok());

        let wrong = Mismatch::Value {
            row: 77,
            col: 45,
            got: 1.5,
            expected: 0.25,
            bound: 0.01,
        };
        let failing = report(vec![
            entry("1,8,512,512,64,f16", 4096, vec![]),
            entry("1,8,512,512,64,bf16", 0, vec![wrong]),
        ]);
        assert!(
            table(&failing).contains("B1 H8 L512 D64 bf16: out of tolerance: row 77 (b=0 h=0 i=77) col 45: 1.5 here, 0.25 in the snapshot"),
            "{}",
            table(&failing)
        );
        let e = verdict(&failing).unwrap_err().to_string();
        assert!(
            e.starts_with("1 of 2 outputs out of tolerance; the first: B1 H8 L512 D64 bf16, row 77 (b=0 h=0 i=77) col 45"),
            "{e}"
        );
    }
}
