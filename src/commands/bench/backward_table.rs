//! The rows and the table of `evo bench --champions DIR --backward`: per class of the
//! dispatch table, evo's backward champion for the class's head dim beside PyTorch's
//! backward kernels (cuDNN, flash) on the class's shape.
//!
//! Pure: the GPU part hands over the gate's outcomes and the script's rows, and this
//! pairs them by problem. A figure that is missing says why in the row's notes, so that
//! an empty cell is never read as a slow kernel.

use crate::commands::gate::backward::BackwardOutcome;
use evo_gates::baselines::SdpaResult;
use evo_genome::{Pass, Problem};
use serde::Serialize;
use std::fmt::Write;

/// The backends the table sets beside evo's backward, as the script names them.
pub const BACKENDS: [&str; 2] = ["cudnn", "flash"];

/// A backward genome of the table's `[[backward]]` entries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackwardChampion {
    /// The gate's name for it: `backward d64`.
    pub kernel: String,
    /// The file as the entry names it, relative to the table's folder:
    /// `backward/d64.toml`.
    pub file: String,
    pub genome_id: String,
    /// The genome's one-line summary (`ampere_bwd 128x64 w8 ...`).
    pub summary: String,
    /// Where the genome comes from (the entry's `origin`).
    pub origin: String,
}

/// One class of the table: its backward figures and the baselines' on its shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassRow {
    pub class: String,
    /// The problem's label: `B1 H8 L512 D64 f16`.
    pub shape: String,
    pub problem: Problem,
    /// The backward genome's file; `None` when no entry serves the head dim.
    pub genome: Option<String>,
    pub genome_id: Option<String>,
    /// evo's median µs, calls back to back (warm) and each alone after an L2 read-over.
    pub evo_us: Option<f64>,
    pub evo_cold_us: Option<f64>,
    /// Of the warm median, counting 2.5x the forward's FLOPs (FlashAttention's convention).
    pub tflops: Option<f64>,
    pub cudnn_us: Option<f64>,
    pub cudnn_cold_us: Option<f64>,
    pub flash_us: Option<f64>,
    pub flash_cold_us: Option<f64>,
    /// cuDNN's µs over evo's: above 1, evo is faster.
    pub cudnn_ratio: Option<f64>,
    pub cudnn_cold_ratio: Option<f64>,
    /// Why a figure is missing, and which baseline ran on expanded K/V heads.
    pub notes: Vec<String>,
}

/// The row of class `class` on `problem`: evo's figures from `champion`'s gate
/// (`outcome`), the baselines' from the script's rows of the same problem.
pub fn class_row(
    class: &str,
    problem: &Problem,
    champion: Option<&BackwardChampion>,
    outcome: Option<&BackwardOutcome>,
    sdpa: &[SdpaResult],
) -> ClassRow {
    let mut row = ClassRow {
        class: class.to_string(),
        shape: problem.label(),
        problem: *problem,
        genome: champion.map(|c| c.file.clone()),
        genome_id: champion.map(|c| c.genome_id.clone()),
        evo_us: None,
        evo_cold_us: None,
        tflops: None,
        cudnn_us: None,
        cudnn_cold_us: None,
        flash_us: None,
        flash_cold_us: None,
        cudnn_ratio: None,
        cudnn_cold_ratio: None,
        notes: Vec::new(),
    };
    match (champion, outcome) {
        (None, _) => row
            .notes
            .push(format!("no backward champion for D{}", problem.head_dim)),
        (Some(_), None) => row.notes.push("evo: not gated".into()),
        (Some(_), Some(o)) => match o.timings.iter().find(|t| t.problem == *problem) {
            Some(t) => {
                row.evo_us = Some(t.warm.median_us);
                row.evo_cold_us = Some(t.cold.median_us);
                row.tflops = Some(t.tflops_warm);
            }
            None => row.notes.push(format!("evo: {}", not_timed(o, problem))),
        },
    }
    let mut notes = Vec::new();
    (row.cudnn_us, row.cudnn_cold_us) = baseline(sdpa, problem, "cudnn", &mut notes);
    (row.flash_us, row.flash_cold_us) = baseline(sdpa, problem, "flash", &mut notes);
    row.notes.extend(notes);
    row.cudnn_ratio = ratio(row.cudnn_us, row.evo_us);
    row.cudnn_cold_ratio = ratio(row.cudnn_cold_us, row.evo_cold_us);
    row
}

/// Why the gate has no timing of `problem` for a kernel.
fn not_timed(o: &BackwardOutcome, problem: &Problem) -> String {
    if let Some(f) = o.fast_failures.iter().find(|f| f.problem == *problem) {
        return format!("FAST failed: {}", f.error);
    }
    if let Some(e) = o.compile_errors.first() {
        return format!("compile failed ({e}), not timed");
    }
    if let Some(c) = o.cases.iter().find(|c| !c.passed()) {
        return format!("failed GREEN on {}, not timed (see the log)", c.case);
    }
    format!(
        "not timed: no variant built for D{} {} (see the log)",
        problem.head_dim, problem.dtype
    )
}

/// A backend's warm and cold medians on `problem` from the script's rows; a row's error
/// or variant goes into `notes` (once: the cold row repeats the warm row's error).
fn baseline(
    sdpa: &[SdpaResult],
    problem: &Problem,
    backend: &str,
    notes: &mut Vec<String>,
) -> (Option<f64>, Option<f64>) {
    let mut median = |cold: bool| {
        let r = sdpa.iter().find(|r| {
            r.pass == Pass::Backward
                && r.backend == backend
                && r.problem == *problem
                && (r.timing == "cold-l2") == cold
        })?;
        let mut note = |n: String| {
            if !notes.contains(&n) {
                notes.push(n);
            }
        };
        if let Some(e) = &r.error {
            note(format!("{backend}: {e}"));
        }
        if let Some(v) = &r.variant {
            note(format!("{backend}: on {v}"));
        }
        r.median_us
    };
    (median(false), median(true))
}

/// `baseline / evo`, when both were measured.
fn ratio(baseline: Option<f64>, evo: Option<f64>) -> Option<f64> {
    match (baseline, evo) {
        (Some(b), Some(e)) if e > 0.0 => Some(b / e),
        _ => None,
    }
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.1}"))
}

fn times(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.2}x"))
}

/// The table: one line per class, then the genomes' summaries and how to read it.
pub fn backward_table(rows: &[ClassRow], champions: &[BackwardChampion]) -> String {
    let width = |head: &str, cell: &dyn Fn(&ClassRow) -> usize| {
        rows.iter().map(cell).max().unwrap_or(0).max(head.len())
    };
    let cw = width("class", &|r| r.class.len());
    let sw = width("shape", &|r| r.shape.chars().count());
    let gw = width("genome", &|r| r.genome.as_deref().map_or(0, str::len));
    let heads = [
        "evo µs",
        "evo cold",
        "TFLOP/s",
        "cuDNN µs",
        "cuDNN cold",
        "flash µs",
        "flash cold",
        "cuDNN/evo",
        "cold ratio",
    ];
    let mut out = format!("{:<cw$}  {:<sw$}  {:<gw$}", "class", "shape", "genome");
    for h in heads {
        let _ = write!(out, "  {h:>10}");
    }
    out.push('\n');
    for r in rows {
        let mut line = format!("{:<cw$}  {:<sw$}", r.class, r.shape);
        let Some(genome) = &r.genome else {
            let _ = writeln!(line, "  {}", r.notes.join("; "));
            out += &line;
            continue;
        };
        let _ = write!(line, "  {genome:<gw$}");
        let cells = [
            us(r.evo_us),
            us(r.evo_cold_us),
            r.tflops.map_or_else(|| "-".into(), |t| format!("{t:.0}")),
            us(r.cudnn_us),
            us(r.cudnn_cold_us),
            us(r.flash_us),
            us(r.flash_cold_us),
            times(r.cudnn_ratio),
            times(r.cudnn_cold_ratio),
        ];
        for c in cells {
            let _ = write!(line, "  {c:>10}");
        }
        if !r.notes.is_empty() {
            let _ = write!(line, "  {}", r.notes.join("; "));
        }
        out += line.trim_end();
        out.push('\n');
    }
    out.push('\n');
    for c in champions {
        let _ = writeln!(
            out,
            "{:<gw$}  {} (id {}; {})",
            c.file, c.summary, c.genome_id, c.origin
        );
    }
    out += "µs: medians of one backward call (dQ, dK, dV from Q, K, V, O, dO and the lse); \
            warm: calls back to back; cold: each call alone after an L2 read-over. TFLOP/s: \
            warm, 2.5x the forward's FLOPs. cuDNN/evo above 1: evo is faster.\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::gate::backward::FastFailure;
    use evo_gates::backward::fast::{BackwardTiming, Spread};

    fn problem(spec: &str) -> Problem {
        spec.parse().unwrap()
    }

    fn champion() -> BackwardChampion {
        BackwardChampion {
            kernel: "backward d64".into(),
            file: "backward/d64.toml".into(),
            genome_id: "0123456789abcdef".into(),
            summary: "ampere_bwd 128x64 w8".into(),
            origin: "not searched yet".into(),
        }
    }

    fn spread(us: f64) -> Spread {
        Spread {
            median_us: us,
            min_us: us,
            max_us: us,
        }
    }

    fn timing(p: &Problem, warm: f64, cold: f64) -> BackwardTiming {
        BackwardTiming {
            kernel: "backward d64".into(),
            problem: *p,
            warm: spread(warm),
            cold: spread(cold),
            tflops_warm: 100.0,
            tflops_cold: 90.0,
            sets: 8,
            repeats: 7,
            checked: 16,
            run_seed: 2026,
        }
    }

    fn outcome(timings: Vec<BackwardTiming>) -> BackwardOutcome {
        BackwardOutcome {
            kernel: "backward d64".into(),
            genome_id: Some("0123456789abcdef".into()),
            passed: true,
            cases: Vec::new(),
            timings,
            fast_failures: Vec::new(),
            compile_errors: Vec::new(),
        }
    }

    /// A row as scripts/sdpa_backward_baseline.py prints one.
    fn sdpa(backend: &str, p: &Problem, timing: &str, us: Option<f64>) -> SdpaResult {
        SdpaResult {
            backend: backend.into(),
            problem: *p,
            device: "H100".into(),
            median_us: us,
            min_us: us,
            max_us: us,
            tflops: None,
            rel_frob: None,
            max_abs: None,
            error: None,
            timing: timing.into(),
            variant: None,
            pass: Pass::Backward,
            grads: None,
        }
    }

    #[test]
    fn evo_and_the_baselines_pair_by_problem_and_ratios_are_cudnn_over_evo() {
        let p = problem("1,8,512,512,64,f16");
        let other = problem("4,16,1024,1024,64,f16,causal");
        let rows = vec![
            sdpa("cudnn", &p, "graph", Some(30.0)),
            sdpa("cudnn", &p, "cold-l2", Some(36.0)),
            sdpa("flash", &p, "events", Some(45.0)),
            sdpa("flash", &p, "cold-l2", Some(50.0)),
            // Another class's shape, a forward row and an unknown backend: not this row's.
            sdpa("cudnn", &other, "graph", Some(1.0)),
            SdpaResult {
                pass: Pass::Forward,
                ..sdpa("flash", &p, "graph", Some(2.0))
            },
            sdpa("efficient", &p, "graph", Some(3.0)),
        ];
        let c = champion();
        let o = outcome(vec![timing(&other, 1.0, 1.0), timing(&p, 40.0, 30.0)]);
        let row = class_row("b1-h8-l512-d64", &p, Some(&c), Some(&o), &rows);
        assert_eq!(row.shape, "B1 H8 L512 D64 f16");
        assert_eq!(row.genome.as_deref(), Some("backward/d64.toml"));
        assert_eq!((row.evo_us, row.evo_cold_us), (Some(40.0), Some(30.0)));
        assert_eq!(row.tflops, Some(100.0));
        assert_eq!((row.cudnn_us, row.cudnn_cold_us), (Some(30.0), Some(36.0)));
        assert_eq!((row.flash_us, row.flash_cold_us), (Some(45.0), Some(50.0)));
        assert_eq!(row.cudnn_ratio, Some(0.75), "cuDNN faster warm: below 1");
        assert_eq!(row.cudnn_cold_ratio, Some(1.2), "evo faster cold: above 1");
        assert!(row.notes.is_empty(), "{:?}", row.notes);

        let table = backward_table(&[row], &[c]);
        let line = table.lines().nth(1).unwrap();
        assert!(
            line.starts_with("b1-h8-l512-d64  B1 H8 L512 D64 f16"),
            "{table}"
        );
        for cell in ["40.0", "30.0", "100", "36.0", "45.0", "0.75x", "1.20x"] {
            assert!(line.contains(cell), "{cell}: {table}");
        }
        assert!(
            table.contains("backward/d64.toml  ampere_bwd 128x64 w8 (id 0123456789abcdef"),
            "{table}"
        );
    }

    #[test]
    fn a_missing_figure_says_why() {
        let d256 = problem("1,16,4096,4096,256,f16,causal,kv=8");
        let row = class_row("b1-h16kv8-l4096-d256-causal", &d256, None, None, &[]);
        assert_eq!(row.notes, ["no backward champion for D256"]);
        assert_eq!((row.evo_us, row.cudnn_ratio), (None, None));
        let table = backward_table(std::slice::from_ref(&row), &[]);
        assert!(
            table.contains("B1 H16/8 L4096 D256 f16 causal  no backward champion for D256"),
            "{table}"
        );

        // FAST rejected the problem; cuDNN refused the mask (its cold row repeats the
        // error: one note), flash ran on expanded K/V heads and has no cold figure.
        let p = problem("16,32,1,8192,128,f16,causal=br,kv=8");
        let mut o = outcome(Vec::new());
        o.passed = false;
        o.fast_failures.push(FastFailure {
            problem: p,
            error: "timed call 3 failed its check".into(),
        });
        let refused = |timing| SdpaResult {
            error: Some("unsupported: the mask".into()),
            ..sdpa("cudnn", &p, timing, None)
        };
        let rows = vec![
            refused("graph"),
            refused("cold-l2"),
            SdpaResult {
                variant: Some("expanded-kv".into()),
                ..sdpa("flash", &p, "graph", Some(180.0))
            },
        ];
        let row = class_row("decode", &p, Some(&champion()), Some(&o), &rows);
        assert_eq!(
            row.notes,
            [
                "evo: FAST failed: timed call 3 failed its check",
                "cudnn: unsupported: the mask",
                "flash: on expanded-kv",
            ]
        );
        assert_eq!((row.flash_us, row.flash_cold_us), (Some(180.0), None));
        assert_eq!((row.cudnn_ratio, row.cudnn_cold_ratio), (None, None));
        let table = backward_table(&[row], &[]);
        assert!(table.contains("180.0"), "{table}");
        assert!(table.contains("evo: FAST failed"), "{table}");

        // Not timed at all: the kernel failed GREEN, or never compiled.
        let mut green = outcome(Vec::new());
        green
            .cases
            .push(evo_gates::backward::green::BackwardCaseReport {
                case: "B1 H8 L512 D64 f16".into(),
                problem: p,
                launches: Vec::new(),
                skipped: None,
                failures: vec!["launch 0: dQ wrong".into()],
            });
        let row = class_row("decode", &p, Some(&champion()), Some(&green), &[]);
        assert_eq!(
            row.notes,
            ["evo: failed GREEN on B1 H8 L512 D64 f16, not timed (see the log)"]
        );
        green.compile_errors.push("D128 f16: ptxas".into());
        let row = class_row("decode", &p, Some(&champion()), Some(&green), &[]);
        assert_eq!(
            row.notes,
            ["evo: compile failed (D128 f16: ptxas), not timed"]
        );
    }
}
