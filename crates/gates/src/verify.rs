//! What a check of one launch found, however it was computed: row by row on the device
//! against the fp32 reference the device computed (every row; GREEN's large cases and
//! every FAST check), or on the CPU against candle's reference (GREEN's small cases,
//! and the fake kernels of the tests).
//!
//! Both paths summarise a row the same way ([`RowStat`], the device's `evo_compare_rows`
//! of `kernels/verify.cu`, of which [`RowStat::of_row`] is the CPU copy) and turn rows
//! into one [`LaunchStats`]; [`verdict`] applies the tolerance. The device's reference
//! is not trusted: [`cross_check`] holds it to candle's on rows both computed, each
//! time it is used.

use crate::error::GateError;
use crate::green::LaunchCheck;
use crate::inputs::{poison_bits, to_f32};
use crate::reference::Reference;
use crate::tolerance::{ErrorStats, RowSummary, Tolerance};
use evo_genome::{Dtype, Problem};

/// One row of a launch's output against the reference, as the device sums it.
/// `#[repr(C)]`: the layout of `RowStat` in `kernels/verify.cu`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RowStat {
    pub diff_sq: f64,
    pub ref_sq: f64,
    /// The largest |got − expected| (a NaN counts as infinite); −1 for an empty row.
    pub max_abs: f64,
    pub got: f32,
    pub expected: f32,
    pub worst_col: i32,
    /// Columns still holding the poison, and the first of them (D when none).
    pub unwritten: i32,
    pub first_unwritten: i32,
    /// Other columns that are NaN or ±Inf, and the first of them (D when none).
    pub nonfinite: i32,
    pub first_nonfinite: i32,
    pub pad: i32,
}

impl RowStat {
    /// The CPU copy of the device's row comparison.
    pub fn of_row(got: &[u16], expected: &[f32], dtype: Dtype) -> RowStat {
        let d = got.len() as i32;
        let poison = poison_bits(dtype);
        let mut s = RowStat {
            max_abs: -1.0,
            worst_col: d,
            first_unwritten: d,
            first_nonfinite: d,
            ..RowStat::default()
        };
        for (c, (&bits, &e)) in got.iter().zip(expected).enumerate() {
            let g = to_f32(dtype, bits);
            let diff = (g as f64 - e as f64).abs();
            s.diff_sq += diff * diff;
            s.ref_sq += e as f64 * e as f64;
            let size = if diff.is_nan() { f64::INFINITY } else { diff };
            if size > s.max_abs {
                (s.max_abs, s.got, s.expected, s.worst_col) = (size, g, e, c as i32);
            }
            if bits == poison {
                s.unwritten += 1;
                s.first_unwritten = s.first_unwritten.min(c as i32);
            } else if !g.is_finite() {
                s.nonfinite += 1;
                s.first_nonfinite = s.first_nonfinite.min(c as i32);
            }
        }
        s
    }
}

/// Everything a check found in one launch's output.
#[derive(Debug, Clone, Default)]
pub struct LaunchStats {
    pub errors: ErrorStats,
    /// Elements still holding the poison, and the first (a flat index into O).
    pub unwritten: usize,
    pub first_unwritten: Option<usize>,
    /// Written elements that are NaN or ±Inf, and the first.
    pub nonfinite: usize,
    pub first_nonfinite: Option<usize>,
    /// Query rows compared with the reference.
    pub rows: usize,
}

impl LaunchStats {
    /// Every row of a launch's output, in order (row `r` is `b·H·Lq + h·Lq + i`).
    pub fn from_rows(problem: &Problem, rows: &[RowStat]) -> LaunchStats {
        let (lq, d) = (problem.q_len as usize, problem.head_dim.get() as usize);
        let heads = problem.heads as usize;
        let mut stats = LaunchStats {
            rows: rows.len(),
            ..LaunchStats::default()
        };
        for (r, row) in rows.iter().enumerate() {
            let (bh, i) = (r / lq, r % lq);
            stats.errors.add_row_summary(RowSummary {
                at: ((bh / heads) as u32, (bh % heads) as u32, i as u32),
                diff_sq: row.diff_sq,
                ref_sq: row.ref_sq,
                max_abs: row.max_abs,
                worst: (row.max_abs >= 0.0).then_some((
                    row.worst_col as u32,
                    row.got,
                    row.expected,
                )),
                columns: d,
            });
            if row.unwritten > 0 {
                stats.unwritten += row.unwritten as usize;
                stats
                    .first_unwritten
                    .get_or_insert(r * d + row.first_unwritten as usize);
            }
            if row.nonfinite > 0 {
                stats.nonfinite += row.nonfinite as usize;
                stats
                    .first_nonfinite
                    .get_or_insert(r * d + row.first_nonfinite as usize);
            }
        }
        stats
    }
}

/// Where a flat index of O is: `(b=.., h=.., row=.., col=..)`.
pub fn locate(problem: &Problem, i: usize) -> String {
    let (lq, d) = (problem.q_len as usize, problem.head_dim.get() as usize);
    let heads = problem.heads as usize;
    let (bh, rest) = (i / (lq * d), i % (lq * d));
    format!(
        "(b={}, h={}, row={}, col={})",
        bh / heads,
        bh % heads,
        rest / d,
        rest % d
    )
}

/// What else a check can find besides the numbers.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// The kernel wrote past the end of O or of the workspace.
    pub guard_breach: Option<String>,
    /// Elements of Q, K or V that no longer held what was drawn after the launch.
    pub inputs_changed: Option<u64>,
}

/// The verdict on one launch: `stats` against the dtype's tolerance, plus `findings`.
pub fn verdict(
    problem: &Problem,
    input_seed: u64,
    stats: &LaunchStats,
    findings: &Findings,
    max_abs_score: f32,
) -> LaunchCheck {
    let tol = Tolerance::for_dtype(problem.dtype);
    let mut reasons: Vec<String> = findings.guard_breach.iter().cloned().collect();
    if let Some(n) = findings.inputs_changed.filter(|&n| n > 0) {
        reasons.push(format!(
            "{n} elements of Q, K and V no longer hold the inputs after the launch (the \
             kernel wrote into its inputs)"
        ));
    }
    let elems = problem.q_elems();
    if let Some(first) = stats.first_unwritten {
        reasons.push(format!(
            "{} of {elems} output elements never written (still the NaN poison), first at {}",
            stats.unwritten,
            locate(problem, first)
        ));
    }
    if let Some(first) = stats.first_nonfinite {
        reasons.push(format!(
            "{} output elements are NaN or Inf, first at {}",
            stats.nonfinite,
            locate(problem, first)
        ));
    }
    let violations = stats.errors.violations(&tol);
    if !violations.is_empty() {
        let worst = stats
            .errors
            .worst
            .map(|w| format!("; worst at {w}"))
            .unwrap_or_default();
        reasons.push(format!(
            "{} over {} rows{worst}",
            violations.join(", "),
            stats.rows
        ));
    }
    LaunchCheck {
        input_seed,
        rel_frob: stats.errors.rel_frob(),
        max_abs: stats.errors.max_abs,
        worst: stats.errors.worst,
        unwritten: stats.unwritten,
        nonfinite: stats.nonfinite,
        rows_checked: stats.rows,
        max_abs_score,
        failure: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

/// How closely the device reference must agree with candle's, as a fraction of the
/// dtype's tolerance: a reference within a tenth of it cannot flip a verdict that is
/// not already on the limit.
pub const AGREEMENT: f64 = 0.1;

/// The global row indices (`bh·Lq + row`) of a CPU reference's rows, in its order.
pub fn reference_row_indices(problem: &Problem, cpu: &Reference) -> Vec<u32> {
    let lq = problem.q_len;
    cpu.heads
        .iter()
        .enumerate()
        .flat_map(|(bh, h)| h.rows.iter().map(move |&r| bh as u32 * lq + r))
        .collect()
}

/// Holds the device reference's values at the rows of `cpu` (D floats each, in the
/// order of [`reference_row_indices`]) to candle's. An error here is the gates', not
/// the kernel's: the device reference cannot be used to judge.
pub fn cross_check(
    problem: &Problem,
    device_rows: &[f32],
    cpu: &Reference,
) -> Result<(), GateError> {
    let d = problem.head_dim.get() as usize;
    let expected: Vec<f32> = cpu
        .heads
        .iter()
        .flat_map(|h| h.out.iter().copied())
        .collect();
    if device_rows.len() != expected.len() {
        return Err(GateError::Reference(format!(
            "the device reference returned {} values for {} rows of {problem}",
            device_rows.len(),
            expected.len() / d.max(1)
        )));
    }
    let mut stats = ErrorStats::default();
    let rows = reference_row_indices(problem, cpu);
    let (lq, heads) = (problem.q_len as usize, problem.heads as usize);
    for (n, &r) in rows.iter().enumerate() {
        let (bh, i) = (r as usize / lq, r as usize % lq);
        for c in 0..d {
            stats.add(
                ((bh / heads) as u32, (bh % heads) as u32, i as u32, c as u32),
                device_rows[n * d + c],
                expected[n * d + c],
            );
        }
    }
    let tol = Tolerance::for_dtype(problem.dtype);
    let limit = Tolerance {
        rel_frob: tol.rel_frob * AGREEMENT,
        max_abs: tol.max_abs * AGREEMENT,
    };
    let off = stats.violations(&limit);
    if off.is_empty() {
        return Ok(());
    }
    Err(GateError::Reference(format!(
        "the device reference disagrees with candle's on {} rows of {problem}: {}{}; the \
         gates cannot judge with it",
        rows.len(),
        off.join(", "),
        stats
            .worst
            .map(|w| format!("; worst at {w}"))
            .unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::to_bits;
    use evo_genome::HeadDim;

    fn problem() -> Problem {
        Problem {
            batch: 2,
            heads: 3,
            q_len: 5,
            kv_len: 7,
            head_dim: HeadDim::D64,
            dtype: Dtype::F16,
            causal: false,
            ..Problem::seed()
        }
    }

    #[test]
    fn rows_locate_the_first_unwritten_and_nonfinite_elements_and_the_worst() {
        let p = problem();
        let d = 64;
        let rows: Vec<RowStat> = (0..30)
            .map(|r| {
                let expected: Vec<f32> = (0..d).map(|c| (r * d + c) as f32 * 1e-3).collect();
                let mut got: Vec<u16> = expected.iter().map(|&x| to_bits(Dtype::F16, x)).collect();
                if r == 17 {
                    got[9] = poison_bits(Dtype::F16);
                    got[11] = 0x7C00; // +Inf
                }
                if r == 20 {
                    got[3] = to_bits(Dtype::F16, expected[3] + 0.5);
                }
                RowStat::of_row(&got, &expected, Dtype::F16)
            })
            .collect();
        let s = LaunchStats::from_rows(&p, &rows);
        assert_eq!((s.unwritten, s.nonfinite, s.rows), (1, 1, 30));
        // Row 17 is b = 1, h = 0 (B2 H3 Lq5), query row 2.
        assert_eq!(
            locate(&p, s.first_unwritten.unwrap()),
            "(b=1, h=0, row=2, col=9)"
        );
        assert_eq!(
            locate(&p, s.first_nonfinite.unwrap()),
            "(b=1, h=0, row=2, col=11)"
        );
        let w = s.errors.worst.unwrap();
        assert_eq!(
            (w.b, w.h, w.row, w.col),
            (1, 0, 2, 9),
            "the poison NaN comes first"
        );
        let check = verdict(&p, 4, &s, &Findings::default(), 0.0);
        let why = check.failure.unwrap();
        assert!(
            why.contains("1 of 1920 output elements never written"),
            "{why}"
        );
        assert!(why.contains("NaN or Inf"), "{why}");
    }

    #[test]
    fn findings_are_reasons() {
        let p = problem();
        let f = Findings {
            guard_breach: Some("wrote past the end of O".into()),
            inputs_changed: Some(12),
        };
        let why = verdict(&p, 1, &LaunchStats::default(), &f, 0.0)
            .failure
            .unwrap();
        assert!(why.contains("wrote past the end of O"), "{why}");
        assert!(why.contains("12 elements of Q, K and V"), "{why}");
        let clean = verdict(&p, 1, &LaunchStats::default(), &Findings::default(), 0.0);
        assert_eq!(clean.failure, None);
    }
}
