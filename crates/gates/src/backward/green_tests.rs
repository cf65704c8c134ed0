//! GREEN's backward verdicts on kernels that need no GPU: one that returns the
//! reference's gradients (rounded to the element type) passes; each defect a real
//! backward kernel can have fails with a message that names it.

use super::green::{run_backward_green, BackwardKernel, BackwardReferences};
use super::reference::gradients;
use super::BackwardInputs;
use crate::device::{BackwardOutput, BackwardTensors};
use crate::error::GateError;
use crate::inputs::{poison_bits, to_bits};
use crate::suite::Case;
use evo_genome::Problem;

/// What the fake kernel gets wrong.
#[derive(Clone, Copy, PartialEq)]
enum Defect {
    None,
    /// Leaves the last dQ row as it found it (poisoned).
    SkipsLastQueryRow,
    /// Drops the first query's contribution to dV (a loop that starts one block late).
    DropsFirstQueryInDv,
    /// dK and dV of grouped heads from the group's first query head only.
    IgnoresTheGroup,
    /// Says it is deterministic but its second call on the same inputs differs.
    FalselyDeterministic,
    /// Writes past dK (the device layer reports the guard).
    WritesPastDk,
}

struct Fake {
    defect: Defect,
    calls: usize,
}

impl BackwardKernel for Fake {
    fn name(&self) -> &str {
        "fake"
    }
    fn deterministic(&self) -> bool {
        self.defect == Defect::FalselyDeterministic
    }
    fn supports(&self, _: &Problem) -> bool {
        true
    }
    fn run(&mut self, t: &BackwardTensors) -> Result<BackwardOutput, GateError> {
        self.calls += 1;
        let p = t.problem;
        let mut inputs = BackwardInputs {
            problem: p,
            seed: 0,
            q_gain: 1.0,
            q: t.q.to_vec(),
            k: t.k.to_vec(),
            v: t.v.to_vec(),
            o: t.o.to_vec(),
            d_o: t.d_o.to_vec(),
            lse: t.lse.to_vec(),
        };
        let d = p.head_dim.get() as usize;
        match self.defect {
            Defect::DropsFirstQueryInDv => {
                // dO of query 0 of every head zeroed for dV only: recompute dV from it.
                let mut dropped = inputs.clone();
                for bh in 0..(p.batch * p.heads) as usize {
                    let at = bh * p.q_len as usize * d;
                    dropped.d_o[at..at + d].fill(0);
                }
                let full = gradients(&inputs)?;
                let wrong = gradients(&dropped)?;
                return Ok(output(&p, full.dq, full.dk, wrong.dv));
            }
            Defect::IgnoresTheGroup => {
                // Every query head but the group's first contributes nothing.
                let g = p.group() as usize;
                for bh in 0..(p.batch * p.heads) as usize {
                    if bh % g != 0 {
                        let at = bh * p.q_len as usize * d;
                        inputs.d_o[at..at + p.q_len as usize * d].fill(0);
                    }
                }
                let full = gradients(&BackwardInputs {
                    d_o: t.d_o.to_vec(),
                    ..inputs.clone()
                })?;
                let wrong = gradients(&inputs)?;
                return Ok(output(&p, full.dq, wrong.dk, wrong.dv));
            }
            _ => {}
        }
        let g = gradients(&inputs)?;
        let mut out = output(&p, g.dq, g.dk, g.dv);
        match self.defect {
            Defect::SkipsLastQueryRow => {
                let n = out.dq.len();
                out.dq[n - d..].fill(poison_bits(p.dtype));
            }
            Defect::FalselyDeterministic if self.calls > 2 => out.dv[0] ^= 1,
            Defect::WritesPastDk => out.breach = Some("dK's guard changed at element 3".into()),
            _ => {}
        }
        Ok(out)
    }
}

fn output(p: &Problem, dq: Vec<f32>, dk: Vec<f32>, dv: Vec<f32>) -> BackwardOutput {
    let bits = |v: Vec<f32>| v.into_iter().map(|x| to_bits(p.dtype, x)).collect();
    BackwardOutput {
        dq: bits(dq),
        dk: bits(dk),
        dv: bits(dv),
        breach: None,
        inputs_changed: None,
    }
}

fn verdict(defect: Defect, spec: &str) -> Vec<String> {
    let case = Case {
        problem: spec.parse().unwrap(),
        q_gain: 1.0,
        drawn: false,
    };
    let mut fake = Fake { defect, calls: 0 };
    let mut refs = BackwardReferences::default();
    let reports = run_backward_green(&mut fake, &[case], 2026, false, &mut refs).unwrap();
    reports[0].failures.clone()
}

const GQA: &str = "1,4,37,53,64,f16,causal=br,kv=2";

#[test]
fn the_reference_rounded_passes_on_every_kind() {
    for spec in [
        GQA,
        "2,2,40,17,96,bf16,causal",
        "1,2,20,30,64,f16,window=5:3",
    ] {
        assert_eq!(verdict(Defect::None, spec), Vec::<String>::new(), "{spec}");
    }
}

#[test]
fn each_defect_fails_with_a_message_that_names_it() {
    let has = |f: &[String], what: &str| f.iter().any(|m| m.contains(what));
    let f = verdict(Defect::SkipsLastQueryRow, GQA);
    assert!(has(&f, "dQ: element"), "{f:?}");
    let f = verdict(Defect::DropsFirstQueryInDv, GQA);
    assert!(has(&f, "dV: "), "{f:?}");
    assert!(!has(&f, "dQ: "), "{f:?}");
    let f = verdict(Defect::IgnoresTheGroup, GQA);
    assert!(has(&f, "dK: ") && has(&f, "dV: "), "{f:?}");
    let f = verdict(Defect::FalselyDeterministic, GQA);
    assert!(has(&f, "evo_deterministic"), "{f:?}");
    let f = verdict(Defect::WritesPastDk, GQA);
    assert!(has(&f, "guard"), "{f:?}");
}
