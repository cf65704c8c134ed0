//! A fake device: CPU "kernels" that compute attention correctly or in one of the
//! classic wrong ways, so that GREEN's and FAST's logic is tested without a GPU
//! (cubecl's `tests/dummy`). Each wrong kind mirrors a hand-written adversarial
//! kernel in tests/kernels/.

use crate::error::GateError;
use crate::inputs::{poison_bits, to_bits, Inputs};
use crate::kernel::{AttentionKernel, TimingMethod};
use evo_genome::Problem;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Correct,
    Zeros,
    CopiesV,
    SkipsLastPartialTile,
    IgnoresCausal,
    HalfTheBatch,
    NoRunningMax,
    /// Rows that see every key skip the last one (an off-by-one tile bound).
    DropsLastKey,
    /// Correct on the first call, then hands back the first call's output.
    ReusesFirstResult,
    /// Correct, plus a bias of `f32` on every element.
    Biased(u32),
}

pub struct FakeKernel {
    pub behaviour: Behaviour,
    first: Option<Vec<u16>>,
    prepared: Option<Problem>,
    /// Simulated time of one call, µs.
    pub call_us: f64,
    pub graph_fails: bool,
    pub timed_with: Vec<TimingMethod>,
}

impl FakeKernel {
    pub fn new(behaviour: Behaviour) -> FakeKernel {
        FakeKernel {
            behaviour,
            first: None,
            prepared: None,
            call_us: 20.0,
            graph_fails: false,
            timed_with: Vec::new(),
        }
    }
}

const TILE: usize = 64;

fn attention(inputs: &Inputs, behaviour: Behaviour) -> Vec<u16> {
    let p = &inputs.problem;
    let (lq, lk, d) = (
        p.q_len as usize,
        p.kv_len as usize,
        p.head_dim.get() as usize,
    );
    let bhs = (p.batch * p.heads) as usize;
    let (q, k, v) = (inputs.q_f32(), inputs.k_f32(), inputs.v_f32());
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![poison_bits(p.dtype); p.q_elems()];
    for bh in 0..bhs {
        if behaviour == Behaviour::HalfTheBatch && bh >= bhs.div_ceil(2) {
            continue;
        }
        for i in 0..lq {
            if behaviour == Behaviour::SkipsLastPartialTile
                && lq % TILE != 0
                && i >= lq / TILE * TILE
            {
                continue;
            }
            let o = &mut out[(bh * lq + i) * d..(bh * lq + i + 1) * d];
            match behaviour {
                Behaviour::Zeros => o.fill(to_bits(p.dtype, 0.0)),
                Behaviour::CopiesV => {
                    for c in 0..d {
                        o[c] = to_bits(p.dtype, v[(bh * lk + i.min(lk - 1)) * d + c]);
                    }
                }
                _ => {
                    let causal = p.causal && behaviour != Behaviour::IgnoresCausal;
                    let mut visible = if causal { (i + 1).min(lk) } else { lk };
                    if behaviour == Behaviour::DropsLastKey && visible == lk && lk > 1 {
                        visible -= 1;
                    }
                    let s: Vec<f32> = (0..visible)
                        .map(|j| {
                            (0..d)
                                .map(|c| q[(bh * lq + i) * d + c] * k[(bh * lk + j) * d + c])
                                .sum::<f32>()
                                * scale
                        })
                        .collect();
                    let m = if behaviour == Behaviour::NoRunningMax {
                        0.0
                    } else {
                        s.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
                    };
                    let e: Vec<f32> = s.iter().map(|x| (x - m).exp()).collect();
                    let l: f32 = e.iter().sum();
                    let bias = match behaviour {
                        Behaviour::Biased(b) => f32::from_bits(b),
                        _ => 0.0,
                    };
                    for c in 0..d {
                        let acc: f32 = (0..visible).map(|j| e[j] * v[(bh * lk + j) * d + c]).sum();
                        o[c] = to_bits(p.dtype, acc / l + bias);
                    }
                }
            }
        }
    }
    out
}

impl AttentionKernel for FakeKernel {
    fn name(&self) -> &str {
        "fake"
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Vec<u16>, GateError> {
        if self.behaviour == Behaviour::ReusesFirstResult {
            if let Some(first) = self
                .first
                .as_ref()
                .filter(|f| f.len() == inputs.problem.q_elems())
            {
                return Ok(first.clone());
            }
            let out = attention(inputs, Behaviour::Correct);
            self.first = Some(out.clone());
            return Ok(out);
        }
        Ok(attention(inputs, self.behaviour))
    }

    fn prepare_timing(&mut self, inputs: &Inputs, _sets: usize) -> Result<(), GateError> {
        self.prepared = Some(inputs.problem);
        Ok(())
    }

    fn time_calls(&mut self, calls: u32, method: TimingMethod) -> Result<f64, GateError> {
        if method == TimingMethod::Graph && self.graph_fails {
            return Err(GateError::Driver {
                during: "capturing".into(),
                message: "not capturable".into(),
            });
        }
        self.timed_with.push(method);
        // Events pay a simulated 4 µs host gap per call; graphs do not.
        let gap = if method == TimingMethod::Events {
            4.0
        } else {
            0.0
        };
        Ok(calls as f64 * (self.call_us + gap) / 1e3)
    }

    fn prepared(&self) -> Option<Problem> {
        self.prepared
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{evaluate, EvalOptions};
    use crate::fast::{time_problem, FastOptions};
    use crate::green::{run_green, GreenCache, GreenOptions};
    use crate::outcome::Status;
    use crate::suite::{Case, LARGE_LOGIT_GAIN};
    use evo_genome::{Dtype, Genome, HeadDim};

    /// `(B, H, Lq, Lk)`, head dim, dtype, causal, Q gain.
    fn case(
        shape: (u32, u32, u32, u32),
        d: HeadDim,
        dtype: Dtype,
        causal: bool,
        q_gain: f32,
    ) -> Case {
        let (batch, heads, q_len, kv_len) = shape;
        Case {
            problem: Problem {
                batch,
                heads,
                q_len,
                kv_len,
                head_dim: d,
                dtype,
                causal,
            },
            q_gain,
        }
    }

    /// Small cases with the same traps as the default suite (debug-build CPU speed).
    fn small_suite() -> Vec<Case> {
        vec![
            case((2, 3, 77, 77), HeadDim::D64, Dtype::F16, true, 1.0),
            case((1, 2, 100, 40), HeadDim::D128, Dtype::Bf16, true, 1.0),
            case((1, 3, 20, 90), HeadDim::D64, Dtype::F16, false, 1.0),
            case(
                (1, 2, 96, 96),
                HeadDim::D64,
                Dtype::F16,
                false,
                LARGE_LOGIT_GAIN,
            ),
        ]
    }

    fn green(b: Behaviour) -> crate::green::GreenReport {
        let mut k = FakeKernel::new(b);
        run_green(
            &mut k,
            &small_suite(),
            GreenOptions {
                seed: 5,
                stop_at_first_failure: false,
            },
        )
        .unwrap()
    }

    #[test]
    fn the_correct_kernel_passes_with_small_errors() {
        let r = green(Behaviour::Correct);
        assert!(r.passed(), "{}", r.failures());
        assert_eq!(r.cases.len(), 4);
        for c in &r.cases {
            assert_eq!(c.launches.len(), 2);
            assert_ne!(c.launches[0].input_seed, c.launches[1].input_seed);
            assert!(
                c.rel_frob() < c.tolerance.rel_frob / 2.0,
                "{}: {}",
                c.case,
                c.rel_frob()
            );
        }
        assert!(r.cases[3].launches[0].max_abs_score > 100.0);
    }

    fn assert_rejected(b: Behaviour, expect: &str) {
        let r = green(b);
        assert!(!r.passed(), "{b:?} passed GREEN");
        let failures = r.failures();
        assert!(failures.contains(expect), "{b:?}: {failures}");
    }

    #[test]
    fn every_wrong_kind_is_rejected_with_a_reason() {
        assert_rejected(Behaviour::Zeros, "max abs error");
        assert_rejected(Behaviour::CopiesV, "relative Frobenius error");
        assert_rejected(
            Behaviour::SkipsLastPartialTile,
            "never written (still the NaN poison), first at (b=0, h=0, row=64",
        );
        assert_rejected(
            Behaviour::IgnoresCausal,
            "B2 H3 L77 D64 f16 causal, launch 1 of 2",
        );
        assert_rejected(Behaviour::HalfTheBatch, "never written");
        assert_rejected(Behaviour::NoRunningMax, "large-logits");
        assert_rejected(Behaviour::ReusesFirstResult, "launch 2 of 2");
        assert_rejected(Behaviour::DropsLastKey, "relative Frobenius error");
        assert_rejected(Behaviour::Biased(0.05f32.to_bits()), "max abs error");
    }

    #[test]
    fn no_running_max_fails_only_the_large_logit_case() {
        let r = green(Behaviour::NoRunningMax);
        let failed: Vec<&str> = r
            .cases
            .iter()
            .filter(|c| !c.passed())
            .map(|c| c.case.as_str())
            .collect();
        assert_eq!(failed, vec!["B1 H2 L96 D64 f16 large-logits"]);
        assert!(r.failures().contains("NaN or Inf"), "{}", r.failures());
    }

    #[test]
    fn a_failure_names_where_and_by_how_much() {
        let r = green(Behaviour::IgnoresCausal);
        let c = &r.cases[0];
        let w = c.launches[0].worst.unwrap();
        assert!(w.row < 76, "the last row sees every key either way");
        let reason = c.reason().unwrap();
        assert!(
            reason.contains(&format!("row={}", w.row)) && reason.contains("expected"),
            "{reason}"
        );
    }

    #[test]
    fn stop_at_first_failure_stops() {
        let mut k = FakeKernel::new(Behaviour::Zeros);
        let r = run_green(
            &mut k,
            &small_suite(),
            GreenOptions {
                seed: 1,
                stop_at_first_failure: true,
            },
        )
        .unwrap();
        assert_eq!(r.cases.len(), 1);
    }

    #[test]
    fn fast_uses_graphs_for_small_calls_and_falls_back_to_events() {
        let p = Problem::seed();
        let mut k = FakeKernel::new(Behaviour::Correct);
        let t = time_problem(&mut k, &Inputs::random(&p, 1, 1.0), &FastOptions::default()).unwrap();
        assert_eq!(t.method, "graph");
        assert!(
            (t.median_us - 20.0).abs() < 1e-9,
            "graph replay has no host gaps"
        );
        assert!(
            t.launches_per_repeat as f64 * 20.0 >= 1000.0,
            "a repeat lasts at least 1 ms"
        );
        assert_eq!(t.repeats, 20);

        let mut k = FakeKernel::new(Behaviour::Correct);
        k.graph_fails = true;
        let t = time_problem(&mut k, &Inputs::random(&p, 1, 1.0), &FastOptions::default()).unwrap();
        assert_eq!(t.method, "events");
        assert!((t.median_us - 24.0).abs() < 1e-9);

        let mut k = FakeKernel::new(Behaviour::Correct);
        k.call_us = 5000.0;
        let t = time_problem(&mut k, &Inputs::random(&p, 1, 1.0), &FastOptions::default()).unwrap();
        assert_eq!((t.method.as_str(), t.launches_per_repeat), ("events", 1));
        assert!(!k.timed_with.contains(&TimingMethod::Graph));
        assert_eq!(t.repeats, 20, "5 ms x 20 fits the default 4 s budget");
        let tight = FastOptions {
            budget_ms: 12.0,
            ..FastOptions::default()
        };
        let t = time_problem(&mut k, &Inputs::random(&p, 1, 1.0), &tight).unwrap();
        assert_eq!(t.repeats, 3, "over budget: never fewer than 3 repeats");
    }

    fn small_objective() -> Vec<Problem> {
        vec![small_suite()[2].problem]
    }

    #[test]
    fn evaluate_fills_the_record_or_says_why_not() {
        let g = Genome::baseline();
        let opts = EvalOptions {
            seed: 3,
            fast: FastOptions::default(),
        };
        let mut ok = FakeKernel::new(Behaviour::Correct);
        let e = evaluate(
            &mut ok,
            &g,
            "fake",
            None,
            &small_suite(),
            &small_objective(),
            &opts,
            &mut GreenCache::default(),
        );
        assert_eq!(e.status, Status::Ok, "{}", e.detail);
        assert!((e.score_us.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(e.timings.len(), 1);

        let mut bad = FakeKernel::new(Behaviour::IgnoresCausal);
        let e = evaluate(
            &mut bad,
            &g,
            "fake",
            None,
            &small_suite(),
            &small_objective(),
            &opts,
            &mut GreenCache::default(),
        );
        assert_eq!(e.status, Status::GreenFailed);
        assert!(e.detail.contains("causal"), "{}", e.detail);
        assert!(
            e.timings.is_empty() && e.score_us.is_none(),
            "FAST runs only after GREEN"
        );
    }

    #[test]
    fn a_kernel_that_stops_working_after_green_fails_the_recheck() {
        /// Correct for the first `good` calls, zeros after.
        struct Tired(FakeKernel, usize);
        impl AttentionKernel for Tired {
            fn name(&self) -> &str {
                "tired"
            }
            fn run_once(&mut self, inputs: &Inputs) -> Result<Vec<u16>, GateError> {
                if self.1 == 0 {
                    return Ok(attention(inputs, Behaviour::Zeros));
                }
                self.1 -= 1;
                self.0.run_once(inputs)
            }
            fn prepare_timing(&mut self, inputs: &Inputs, sets: usize) -> Result<(), GateError> {
                self.0.prepare_timing(inputs, sets)
            }
            fn time_calls(&mut self, calls: u32, method: TimingMethod) -> Result<f64, GateError> {
                self.1 = 0;
                self.0.time_calls(calls, method)
            }
            fn prepared(&self) -> Option<Problem> {
                self.0.prepared()
            }
        }
        let mut k = Tired(FakeKernel::new(Behaviour::Correct), usize::MAX);
        let opts = EvalOptions {
            seed: 3,
            fast: FastOptions::default(),
        };
        let e = evaluate(
            &mut k,
            &Genome::baseline(),
            "fake",
            None,
            &small_suite(),
            &small_objective(),
            &opts,
            &mut GreenCache::default(),
        );
        assert_eq!(e.status, Status::GreenFailed);
        assert!(
            e.detail
                .starts_with("passed GREEN but failed the re-check after timing"),
            "{}",
            e.detail
        );
    }
}
