//! What `evo gate` and `evo bench` print and write: one JSON row per kernel × case,
//! and a plain-text table of the same rows.

use crate::green::CaseReport;
use crate::outcome::Timing;
use evo_genome::Problem;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One kernel on one case: GREEN's verdict and, when timed, FAST's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub kernel: String,
    /// The genome's canonical id; `None` for hand-written files and baselines.
    pub genome_id: Option<String>,
    /// `B1 H8 L512 D64 f16` (the problem's label).
    pub shape: String,
    pub problem: Problem,
    pub causal: bool,
    pub dtype: String,
    pub device: String,
    /// `pass`, `fail`, `skipped`, `error` or `timed` (a timing row).
    pub verdict: String,
    pub reason: Option<String>,
    pub rel_frob: Option<f64>,
    pub max_abs: Option<f64>,
    pub median_us: Option<f64>,
    pub min_us: Option<f64>,
    pub max_us: Option<f64>,
    pub tflops: Option<f64>,
    /// `events` or `graph` for timing rows.
    pub method: Option<String>,
    /// The kernel's place in the gate's list (from 1), as its progress line says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// The GPU ordinal it ran on, when the gate ran on several (`evo gate --gpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The run seed GREEN's inputs and drawn shapes came from (`evo gate --seed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// A timing row's verification: how many timed launches were checked, and the key
    /// their inputs were drawn with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<String>,
    /// A GREEN row of a kernel that writes the forward's lse (`evo_lse`): the largest
    /// error of its lse against the reference's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lse_max_err: Option<f64>,
}

impl Row {
    fn base(
        kernel: &str,
        genome_id: Option<&str>,
        problem: &Problem,
        device: &str,
        verdict: &str,
    ) -> Row {
        Row {
            kernel: kernel.to_string(),
            genome_id: genome_id.map(str::to_string),
            shape: problem.label(),
            problem: *problem,
            causal: problem.causal,
            dtype: problem.dtype.label().to_string(),
            device: device.to_string(),
            verdict: verdict.to_string(),
            reason: None,
            rel_frob: None,
            max_abs: None,
            median_us: None,
            min_us: None,
            max_us: None,
            tflops: None,
            method: None,
            position: None,
            gpu: None,
            seed: None,
            checked: None,
            lse_max_err: None,
        }
    }

    /// A GREEN case.
    pub fn green(kernel: &str, genome_id: Option<&str>, device: &str, case: &CaseReport) -> Row {
        let verdict = if case.passed() { "pass" } else { "fail" };
        Row {
            shape: case.case.clone(),
            reason: case.reason(),
            rel_frob: Some(case.rel_frob()),
            max_abs: Some(case.max_abs()),
            lse_max_err: case.lse.as_ref().map(|l| l.lse.max_err),
            ..Row::base(kernel, genome_id, &case.problem, device, verdict)
        }
    }

    /// A case not run, and why (the genome is invalid at that head dim, a runtime error).
    pub fn not_run(
        kernel: &str,
        genome_id: Option<&str>,
        device: &str,
        problem: &Problem,
        verdict: &str,
        reason: String,
    ) -> Row {
        Row {
            reason: Some(reason),
            ..Row::base(kernel, genome_id, problem, device, verdict)
        }
    }

    /// A FAST timing.
    pub fn timed(kernel: &str, genome_id: Option<&str>, device: &str, t: &Timing) -> Row {
        Row {
            median_us: Some(t.median_us),
            min_us: Some(t.min_us),
            max_us: Some(t.max_us),
            tflops: Some(t.tflops),
            method: Some(t.method.clone()),
            ..Row::base(kernel, genome_id, &t.problem, device, "timed")
        }
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

fn sci(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2e}")).unwrap_or_else(|| "-".into())
}

/// GREEN rows as a table: kernel, case, verdict, errors; failure reasons below it.
pub fn green_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let kw = rows
        .iter()
        .map(|r| r.kernel.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let sw = rows.iter().map(|r| r.shape.len()).max().unwrap_or(5).max(5);
    let _ = writeln!(
        out,
        "{:<kw$}  {:<sw$}  {:<7}  {:>9}  {:>9}",
        "kernel", "case", "verdict", "rel_frob", "max_abs"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<kw$}  {:<sw$}  {:<7}  {:>9}  {:>9}",
            r.kernel,
            r.shape,
            r.verdict,
            sci(r.rel_frob),
            sci(r.max_abs)
        );
    }
    for r in rows.iter().filter(|r| r.verdict != "pass") {
        if let Some(reason) = &r.reason {
            let _ = writeln!(out, "{} {}: {reason}", r.verdict.to_uppercase(), r.kernel);
        }
    }
    out
}

/// Timing rows as one table per shape: µs, TFLOP/s and the speedup over each baseline
/// (baseline µs / kernel µs: above 1 means faster than the baseline).
pub fn bench_table(rows: &[Row], baselines: &[String]) -> String {
    let mut out = String::new();
    let mut shapes: Vec<String> = Vec::new();
    for r in rows {
        if !shapes.contains(&r.shape) {
            shapes.push(r.shape.clone());
        }
    }
    let kw = rows
        .iter()
        .map(|r| r.kernel.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let mut header = format!(
        "{:<kw$}  {:>10}  {:>8}  {:>6}",
        "kernel", "median µs", "TFLOP/s", "method"
    );
    for b in baselines {
        let _ = write!(
            header,
            "  {:>w$}",
            format!("vs {b}"),
            w = b.len().max(6) + 3
        );
    }
    for shape in shapes {
        let _ = writeln!(out, "{shape}");
        let _ = writeln!(out, "{header}");
        let of_shape: Vec<&Row> = rows.iter().filter(|r| r.shape == shape).collect();
        let base_us = |name: &str| {
            of_shape
                .iter()
                .find(|r| r.kernel == name)
                .and_then(|r| r.median_us)
        };
        for r in &of_shape {
            let mut line = format!(
                "{:<kw$}  {:>10}  {:>8}  {:>6}",
                r.kernel,
                opt(r.median_us, 2),
                opt(r.tflops, 1),
                r.method.as_deref().unwrap_or(&r.verdict)
            );
            for b in baselines {
                let speedup = match (base_us(b), r.median_us) {
                    (Some(base), Some(us)) if us > 0.0 => format!("{:.2}x", base / us),
                    _ => "-".into(),
                };
                let _ = write!(line, "  {:>w$}", speedup, w = b.len().max(6) + 3);
            }
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::summarize;
    use crate::kernel::TimingMethod;

    #[test]
    fn bench_table_shows_speedups_against_each_baseline() {
        let p = Problem::seed();
        let rows = vec![
            Row::timed(
                "v6a",
                Some("abc"),
                "H100",
                &summarize(&p, &[100.0], 10, TimingMethod::Graph),
            ),
            Row::timed(
                "cublas-hybrid",
                None,
                "H100",
                &summarize(&p, &[25.0], 10, TimingMethod::Events),
            ),
            Row::timed(
                "sdpa-cudnn",
                None,
                "H100",
                &summarize(&p, &[10.0], 10, TimingMethod::Graph),
            ),
        ];
        let table = bench_table(&rows, &["cublas-hybrid".into(), "sdpa-cudnn".into()]);
        insta::assert_snapshot!(table);
    }

    #[test]
    fn green_rows_carry_the_reason_and_serialize() {
        let p = Problem::seed();
        let row = Row::not_run("v9", None, "H100", &p, "skipped", "invalid at D128".into());
        let table = green_table(std::slice::from_ref(&row));
        assert!(table.contains("SKIPPED v9: invalid at D128"), "{table}");
        let json = serde_json::to_value(&row).unwrap();
        for key in [
            "kernel",
            "genome_id",
            "shape",
            "causal",
            "dtype",
            "device",
            "verdict",
            "median_us",
            "min_us",
            "max_us",
            "tflops",
            "rel_frob",
            "max_abs",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
    }
}
