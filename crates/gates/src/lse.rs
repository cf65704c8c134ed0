//! GREEN's check of the forward's log-sum-exp (`evo_lse`, kernels/ABI.md "The
//! log-sum-exp output"): what the backward pass reads, fp32 natural log `[B, H, Lq]`,
//! +inf for a row that sees no key.
//!
//! A kernel that declares `evo_lse` is run once more on every GREEN case with the lse
//! asked for, into a buffer filled with a NaN no arithmetic produces and followed by a
//! guard region. Every row must then have been written exactly where it belongs: the
//! guard intact, no row left holding the poison, a row that sees no key +inf exactly
//! (checked over every row: the mask alone says which), every other row finite, and on
//! the rows the CPU reference computed (every row of a small case, a sample per (b, h)
//! of a large one) within [`crate::tolerance::LSE_ABS`] + `LSE_REL`·|lse| of candle's.
//! O of that run is judged as any other launch's.

use crate::green::LaunchCheck;
use crate::inputs::{guard_breach, Inputs, GUARD_ELEMS, GUARD_F32_BITS};
use crate::reference::Reference;
use crate::tolerance::{lse_within, LSE_ABS, LSE_REL};
use serde::{Deserialize, Serialize};

/// The bits the lse buffer is filled with before the launch: a quiet NaN whose payload
/// no arithmetic produces (canonical NaNs are 0x7FC0_0000 and 0xFFFF_FFFF), so a row
/// still holding it was never written.
pub const LSE_POISON_BITS: u32 = 0x7FC5_1A5E;

/// What a call asked for the lse left in its buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct LseOutput {
    /// B·H·Lq floats, in the order of `[B, H, Lq]`.
    pub lse: Vec<f32>,
    /// Set when the call wrote past the end of the buffer.
    pub guard_breach: Option<String>,
}

/// The lse launch of one GREEN case: its O, judged as any launch's, and its lse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LseCheck {
    pub input_seed: u64,
    /// O of the launch that wrote the lse.
    pub o: LaunchCheck,
    /// The lse's verdict.
    pub lse: LseVerdict,
}

impl LseCheck {
    pub fn passed(&self) -> bool {
        self.o.failure.is_none() && self.lse.failure.is_none()
    }

    /// Why it failed (O's reasons, then the lse's), `None` when it passed.
    pub fn failure(&self) -> Option<String> {
        let reasons: Vec<&str> = [&self.o.failure, &self.lse.failure]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// What the check of one launch's lse found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LseVerdict {
    /// The largest |got − expected| over the reference's rows that see a key (NaN: inf).
    pub max_err: f64,
    /// Rows compared with the reference's lse.
    pub rows_checked: usize,
    /// Every finding, each naming the (b, h, row) and the values; `None` when right.
    pub failure: Option<String>,
}

/// A poisoned lse buffer of `problem` followed by its guard: what the buffer is reset
/// to before the launch.
pub fn fresh_lse(problem: &evo_genome::Problem) -> Vec<f32> {
    let rows = lse_rows(problem);
    let mut v = vec![f32::from_bits(LSE_POISON_BITS); rows + GUARD_ELEMS];
    v[rows..].fill(f32::from_bits(GUARD_F32_BITS));
    v
}

/// Rows of the lse: B·H·Lq.
pub fn lse_rows(problem: &evo_genome::Problem) -> usize {
    (problem.batch * problem.heads) as usize * problem.q_len as usize
}

/// The lse part of a downloaded buffer (poison, then guard) as an [`LseOutput`].
pub fn lse_output(problem: &evo_genome::Problem, buffer: &[f32]) -> LseOutput {
    let rows = lse_rows(problem).min(buffer.len());
    let guard: Vec<u32> = buffer[rows..].iter().map(|x| x.to_bits()).collect();
    LseOutput {
        lse: buffer[..rows].to_vec(),
        guard_breach: guard_breach("lse", &guard, GUARD_F32_BITS),
    }
}

/// The lse of a launch on `inputs` against the reference's rows and the mask: every
/// finding names the (b, h, row) and the values.
pub fn judge_lse(inputs: &Inputs, refs: &Reference, out: &LseOutput) -> LseVerdict {
    let p = &inputs.problem;
    let (lq, heads) = (p.q_len as usize, p.heads as usize);
    let at = |r: usize| {
        let bh = r / lq;
        format!("(b={}, h={}, row={})", bh / heads, bh % heads, r % lq)
    };
    let mut reasons: Vec<String> = out.guard_breach.iter().cloned().collect();
    if out.lse.len() != lse_rows(p) {
        reasons.push(format!(
            "the lse came back with {} rows, expected B·H·Lq = {}",
            out.lse.len(),
            lse_rows(p)
        ));
        return LseVerdict {
            max_err: f64::INFINITY,
            rows_checked: 0,
            failure: Some(reasons.join("; ")),
        };
    }
    // Every row, from the mask alone: written, +inf exactly where no key is seen.
    let sees_none: Vec<bool> = (0..p.q_len).map(|i| p.visible_keys(i).is_empty()).collect();
    let (mut unwritten, mut first_unwritten) = (0usize, None);
    let (mut wrong, mut first_wrong) = (0usize, None);
    for (r, &x) in out.lse.iter().enumerate() {
        let none = sees_none[r % lq];
        if x.to_bits() == LSE_POISON_BITS {
            unwritten += 1;
            first_unwritten.get_or_insert(r);
        } else if (none && x != f32::INFINITY) || (!none && !x.is_finite()) {
            wrong += 1;
            first_wrong.get_or_insert((r, x, none));
        }
    }
    if let Some(r) = first_unwritten {
        reasons.push(format!(
            "lse: {unwritten} of {} rows never written (still the NaN poison), first at {}",
            out.lse.len(),
            at(r)
        ));
    }
    if let Some((r, x, none)) = first_wrong {
        let want = if none {
            "+inf (the row sees no key)"
        } else {
            "a finite value"
        };
        reasons.push(format!(
            "lse: {wrong} rows are not +inf exactly when they see no key and finite \
             otherwise, first at {}: got {x}, expected {want}",
            at(r)
        ));
    }
    // The reference's rows: the values.
    let (mut off, mut worst): (usize, Option<(usize, f32, f32, f64)>) = (0, None);
    let mut max_err = 0f64;
    for (bh, head) in refs.heads.iter().enumerate() {
        for (i, &row) in head.rows.iter().enumerate() {
            let r = bh * lq + row as usize;
            let (got, want) = (out.lse[r], head.lse[i]);
            let err = if got == want {
                0.0
            } else {
                let e = (got as f64 - want as f64).abs();
                if e.is_nan() {
                    f64::INFINITY
                } else {
                    e
                }
            };
            max_err = max_err.max(err);
            if got.to_bits() == LSE_POISON_BITS || lse_within(got, want) {
                continue;
            }
            off += 1;
            if worst.is_none_or(|w| err > w.3) {
                worst = Some((r, got, want, err));
            }
        }
    }
    if let Some((r, got, want, _)) = worst {
        reasons.push(format!(
            "lse: {off} of {} checked rows off by more than {LSE_ABS:e} + {LSE_REL:e}·|lse|, \
             worst at {}: got {got}, expected {want}",
            refs.rows_checked(),
            at(r)
        ));
    }
    LseVerdict {
        max_err,
        rows_checked: refs.rows_checked(),
        failure: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::reference;
    use evo_genome::Problem;

    fn right(inputs: &Inputs, refs: &Reference) -> LseOutput {
        let mut buffer = fresh_lse(&inputs.problem);
        let lq = inputs.problem.q_len as usize;
        for (bh, head) in refs.heads.iter().enumerate() {
            for (i, &row) in head.rows.iter().enumerate() {
                buffer[bh * lq + row as usize] = head.lse[i];
            }
        }
        lse_output(&inputs.problem, &buffer)
    }

    #[test]
    fn the_reference_lse_passes_and_each_kind_of_wrong_row_is_named() {
        // Bottom-right causal with Lq > Lk: rows 0..7 of every head see no key.
        let p: Problem = "2,3,12,5,64,f16,causal=br".parse().unwrap();
        let inputs = Inputs::random(&p, 11, 1.0);
        let refs = reference(&inputs).unwrap();
        let good = right(&inputs, &refs);
        let verdict = judge_lse(&inputs, &refs, &good);
        assert_eq!(
            (verdict.failure, verdict.max_err, verdict.rows_checked),
            (None, 0.0, 72)
        );

        // Row 9 of (b=1, h=2): bh 5, flat 5·12 + 9.
        let mut off = good.clone();
        off.lse[69] += 0.05;
        let why = judge_lse(&inputs, &refs, &off).failure.unwrap();
        assert!(why.contains("1 of 72 checked rows"), "{why}");
        assert!(why.contains("worst at (b=1, h=2, row=9)"), "{why}");

        let mut unwritten = good.clone();
        unwritten.lse[13] = f32::from_bits(LSE_POISON_BITS);
        let why = judge_lse(&inputs, &refs, &unwritten).failure.unwrap();
        assert!(why.contains("1 of 72 rows never written"), "{why}");
        assert!(why.contains("(b=0, h=1, row=1)"), "{why}");

        // A row with no key given -inf (the workspace's convention, not the output's).
        let mut neg = good.clone();
        neg.lse[2] = f32::NEG_INFINITY;
        let why = judge_lse(&inputs, &refs, &neg).failure.unwrap();
        assert!(why.contains("at (b=0, h=0, row=2): got -inf"), "{why}");

        let mut past = fresh_lse(&p);
        past[..72].copy_from_slice(&good.lse);
        past[72 + 3] = 0.0;
        let why = judge_lse(&inputs, &refs, &lse_output(&p, &past))
            .failure
            .unwrap();
        assert!(why.contains("wrote past the end of lse"), "{why}");
    }
}
