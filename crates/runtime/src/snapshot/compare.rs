//! An output judged against a snapshot's summary of it.
//!
//! A chunk whose hash matches is identical, row for row. Any other chunk passes when
//! each sampled value is within `atol + rtol·|ref|` of the snapshot's and its sum and
//! norm are within what that bound allows over its `n` elements:
//!
//! ```text
//! |Σo − Σr|   ≤ Σ|oᵢ − rᵢ| ≤ n·atol + rtol·Σ|rᵢ| ≤ n·atol + rtol·√(n·Σr²)    (Cauchy–Schwarz)
//! |‖o‖ − ‖r‖| ≤ ‖o − r‖   ≤ √n·atol + rtol·‖r‖                              (Minkowski)
//! ```
//!
//! so an output within the bound at every element always passes, while the sums catch
//! a wrong tile that no sampled value lands on. Comparisons are written so that a NaN
//! never passes.

use crate::snapshot::file::{ChampionKernel, ExportInfo, Machine, Snapshot};
use crate::snapshot::summary::{chunk_stats, row_name, OutputSummary};
use evo_genome::{Dtype, Problem};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// The bound on one element: `|o − ref| ≤ atol + rtol·|ref|`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

impl Tolerance {
    fn value_bound(&self, expected: f64) -> f64 {
        self.atol + self.rtol * expected.abs()
    }

    fn sum_bound(&self, n: f64, sum_sq: f64) -> f64 {
        n * self.atol + self.rtol * (n * sum_sq).sqrt()
    }

    fn norm_bound(&self, n: f64, sum_sq: f64) -> f64 {
        n.sqrt() * self.atol + self.rtol * sum_sq.sqrt()
    }
}

/// `x <= bound`, false for NaN.
fn within(x: f64, bound: f64) -> bool {
    x.partial_cmp(&bound).is_some_and(|o| o.is_le())
}

/// One output against its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub rows: u64,
    /// Rows of chunks whose hash matched.
    pub identical_rows: u64,
    /// Rows of chunks that differ but are within the tolerance.
    pub within_rows: u64,
    /// Rows of chunks out of tolerance.
    pub out_rows: u64,
    /// The largest |O − snapshot| of the sampled values.
    pub max_abs_error: f64,
    /// Every value, sum and norm out of tolerance, in row order.
    pub mismatches: Vec<Mismatch>,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// What was out of tolerance.
#[derive(Debug, Clone, PartialEq)]
pub enum Mismatch {
    Value {
        row: u64,
        col: u32,
        got: f32,
        expected: f32,
        bound: f64,
    },
    /// A chunk's Σ O.
    Sum {
        rows: Range<u64>,
        got: f64,
        expected: f64,
        bound: f64,
    },
    /// A chunk's ‖O‖.
    Norm {
        rows: Range<u64>,
        got: f64,
        expected: f64,
        bound: f64,
    },
}

impl Mismatch {
    /// One line naming the rows (as (b, h, i) of `p`), the value and the bound.
    pub fn describe(&self, p: &Problem) -> String {
        let rows = |r: &Range<u64>| format!("{} to {}", row_name(p, r.start), r.end - 1);
        match self {
            Mismatch::Value {
                row,
                col,
                got,
                expected,
                bound,
            } => format!(
                "{} col {col}: {got} here, {expected} in the snapshot, |diff| {:.3e} > {bound:.3e}",
                row_name(p, *row),
                (*got as f64 - *expected as f64).abs()
            ),
            Mismatch::Sum {
                rows: r,
                got,
                expected,
                bound,
            } => format!(
                "{}: sum {got} here, {expected} in the snapshot, |diff| {:.3e} > {bound:.3e}",
                rows(r),
                (got - expected).abs()
            ),
            Mismatch::Norm {
                rows: r,
                got,
                expected,
                bound,
            } => format!(
                "{}: norm {got} here, {expected} in the snapshot, |diff| {:.3e} > {bound:.3e}",
                rows(r),
                (got - expected).abs()
            ),
        }
    }
}

/// `output` (O of the summary's problem in `dtype`) against `reference`.
pub fn compare(
    reference: &OutputSummary,
    dtype: Dtype,
    output: &[u16],
    tolerance: Tolerance,
) -> Comparison {
    let mut c = Comparison {
        rows: reference.rows,
        identical_rows: 0,
        within_rows: 0,
        out_rows: 0,
        max_abs_error: 0.0,
        mismatches: Vec::new(),
    };
    for (k, chunk) in reference.chunks.iter().enumerate() {
        let rows = reference.chunk_rows(k);
        let (hash, sum, sum_sq) = chunk_stats(dtype, reference.elements(output, &rows));
        if hash == chunk.hash {
            c.identical_rows += rows.end - rows.start;
            continue;
        }
        let found = c.mismatches.len();
        for (&col, &expected) in reference.sample_cols.iter().zip(&chunk.samples) {
            let got = reference.value(dtype, output, chunk.sample_row, col);
            let error = (got as f64 - expected as f64).abs();
            c.max_abs_error =
                c.max_abs_error
                    .max(if error.is_nan() { f64::INFINITY } else { error });
            let bound = tolerance.value_bound(expected as f64);
            if !within(error, bound) {
                c.mismatches.push(Mismatch::Value {
                    row: chunk.sample_row,
                    col,
                    got,
                    expected,
                    bound,
                });
            }
        }
        let n = ((rows.end - rows.start) * reference.row_len as u64) as f64;
        let bound = tolerance.sum_bound(n, chunk.sum_sq);
        if !within((sum - chunk.sum).abs(), bound) {
            c.mismatches.push(Mismatch::Sum {
                rows: rows.clone(),
                got: sum,
                expected: chunk.sum,
                bound,
            });
        }
        let (norm, expected) = (sum_sq.sqrt(), chunk.sum_sq.sqrt());
        let bound = tolerance.norm_bound(n, chunk.sum_sq);
        if !within((norm - expected).abs(), bound) {
            c.mismatches.push(Mismatch::Norm {
                rows: rows.clone(),
                got: norm,
                expected,
                bound,
            });
        }
        if c.mismatches.len() > found {
            c.out_rows += rows.end - rows.start;
        } else {
            c.within_rows += rows.end - rows.start;
        }
    }
    c
}

/// How the machine and the export of a check differ from the snapshot's, one phrase
/// each (empty when nothing does): the reasons outputs may differ within tolerance.
pub fn setting_differences(
    snapshot: &Snapshot,
    machine: &Machine,
    export: &ExportInfo,
) -> Vec<String> {
    let r = &snapshot.machine;
    let mut out = Vec::new();
    let mut differ = |what: &str, then: &str, now: &str| {
        if then != now {
            out.push(format!("{what} {then} -> {now}"));
        }
    };
    differ("device", &r.device, &machine.device);
    differ(
        "compute capability",
        &r.compute_capability,
        &machine.compute_capability,
    );
    differ("CUDA driver", &r.cuda_driver, &machine.cuda_driver);
    let unknown = "unknown".to_string();
    differ(
        "NVIDIA driver",
        r.nvidia_driver.as_ref().unwrap_or(&unknown),
        machine.nvidia_driver.as_ref().unwrap_or(&unknown),
    );
    differ("evo", &snapshot.evo_version, env!("CARGO_PKG_VERSION"));
    let (then, now) = (&snapshot.export, export);
    differ("export's device", &then.device, &now.device);
    differ("export's arch", &then.arch, &now.arch);
    differ("export's evo", &then.evo_version, &now.evo_version);
    differ("export's NVRTC", &then.nvrtc_version, &now.nvrtc_version);
    out
}

/// How the kernel that ran a problem here differs from the one the snapshot ran.
pub fn champion_differences(recorded: &ChampionKernel, here: &ChampionKernel) -> Vec<String> {
    let mut out = Vec::new();
    if recorded.class != here.class {
        out.push(format!("class {} -> {}", recorded.class, here.class));
    }
    if recorded.genome_id != here.genome_id {
        out.push(format!(
            "genome {} -> {}",
            recorded.genome_id, here.genome_id
        ));
    }
    if recorded.image != here.image {
        out.push(format!("loaded {} -> {}", recorded.image, here.image));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance {
        atol: 1e-2,
        rtol: 1e-3,
    };

    fn problem() -> Problem {
        "1,2,100,100,64,f16".parse().unwrap()
    }

    /// A smooth output with values around ±1.
    fn output(p: &Problem) -> Vec<u16> {
        (0..p.q_elems())
            .map(|n| half::f16::from_f32(((n % 97) as f32 - 48.0) / 40.0).to_bits())
            .collect()
    }

    fn set(o: &mut [u16], n: usize, x: f32) {
        o[n] = half::f16::from_f32(x).to_bits();
    }

    fn get(o: &[u16], n: usize) -> f32 {
        half::f16::from_bits(o[n]).to_f32()
    }

    #[test]
    fn the_same_output_is_identical_everywhere() {
        let p = problem();
        let o = output(&p);
        let c = compare(&OutputSummary::of(&p, &o), p.dtype, &o, TOL);
        assert!(c.passed());
        assert_eq!((c.identical_rows, c.within_rows, c.out_rows), (200, 0, 0));
        assert_eq!(c.max_abs_error, 0.0);
    }

    #[test]
    fn small_changes_everywhere_are_within_tolerance() {
        let p = problem();
        let o = output(&p);
        let reference = OutputSummary::of(&p, &o);
        // One f16 ulp up on every element: far below atol.
        let nudged: Vec<u16> = o.iter().map(|&b| b + 1).collect();
        let c = compare(&reference, p.dtype, &nudged, TOL);
        assert!(c.passed(), "{:?}", c.mismatches);
        assert_eq!((c.identical_rows, c.within_rows, c.out_rows), (0, 200, 0));
        assert!(
            c.max_abs_error > 0.0 && c.max_abs_error < 1e-3,
            "{}",
            c.max_abs_error
        );
    }

    #[test]
    fn a_wrong_sampled_value_is_caught_with_its_row_and_column() {
        let p = problem();
        let mut o = output(&p);
        let reference = OutputSummary::of(&p, &o);
        // 200 rows in chunks of 4: rows 136..140 are sampled at row 138, column 27 too.
        assert_eq!(reference.chunks[34].sample_row, 138);
        let n = 138 * 64 + 27;
        let was = get(&o, n);
        set(&mut o, n, was + 0.5);
        let c = compare(&reference, p.dtype, &o, TOL);
        assert_eq!((c.identical_rows, c.within_rows, c.out_rows), (196, 0, 4));
        assert!(matches!(
            c.mismatches[..],
            [Mismatch::Value {
                row: 138,
                col: 27,
                ..
            }]
        ));
        let line = c.mismatches[0].describe(&p);
        assert!(
            line.starts_with("row 138 (b=0 h=1 i=38) col 27: "),
            "{line}"
        );
        assert!((c.max_abs_error - 0.5).abs() < 1e-3, "{}", c.max_abs_error);
    }

    #[test]
    fn a_wrong_value_between_samples_is_caught_by_the_sums() {
        let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let mut o = output(&p);
        let reference = OutputSummary::of(&p, &o);
        assert_eq!(reference.rows_per_chunk, 64);
        // Rows 64..128 are chunk 1, sampled at row 96; spoil row 70, column 5.
        let n = 70 * 64 + 5;
        let was = get(&o, n);
        set(&mut o, n, was + 100.0);
        let c = compare(&reference, p.dtype, &o, TOL);
        assert_eq!(c.out_rows, 64);
        assert_eq!(c.max_abs_error, 0.0, "no sampled value moved");
        let Mismatch::Sum { rows, .. } = &c.mismatches[0] else {
            panic!("{:?}", c.mismatches)
        };
        assert_eq!(*rows, 64..128);
        assert!(
            c.mismatches[0]
                .describe(&p)
                .starts_with("row 64 (b=0 h=0 i=64) to 127: sum "),
            "{}",
            c.mismatches[0].describe(&p)
        );
    }

    #[test]
    fn a_nan_is_never_within_tolerance() {
        let p = problem();
        let mut o = output(&p);
        let reference = OutputSummary::of(&p, &o);
        // Row 6 is chunk 1's sample row.
        o[6 * 64 + 9] = 0x7E00;
        let c = compare(&reference, p.dtype, &o, TOL);
        assert_eq!(c.out_rows, 4);
        assert!(matches!(
            c.mismatches[0],
            Mismatch::Value { row: 6, col: 9, .. }
        ));
        assert_eq!(c.max_abs_error, f64::INFINITY);
        assert!(c
            .mismatches
            .iter()
            .any(|m| matches!(m, Mismatch::Sum { .. })));
    }

    #[test]
    fn the_bounds_admit_every_output_within_the_element_bound() {
        // Every element moved by exactly its bound, all the same way: the sums' worst
        // case, which must still pass.
        let p = problem();
        let o = output(&p);
        let reference = OutputSummary::of(&p, &o);
        let tol = Tolerance {
            atol: 0.05,
            rtol: 0.01,
        };
        let moved: Vec<u16> = o
            .iter()
            .map(|&b| {
                let x = half::f16::from_bits(b).to_f32() as f64;
                // Rounding to f16 may land past the bound by half an ulp: stay inside.
                half::f16::from_f64(x + 0.98 * tol.value_bound(x)).to_bits()
            })
            .collect();
        let c = compare(&reference, p.dtype, &moved, tol);
        assert!(c.passed(), "{:?}", c.mismatches);
    }
}
