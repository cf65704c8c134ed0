//! A fake device: CPU "kernels" that compute attention correctly or in one of the
//! classic wrong ways, so that GREEN's and FAST's logic is tested without a GPU
//! (cubecl's `tests/dummy`). Each wrong kind mirrors a hand-written adversarial
//! kernel in tests/kernels/.

use crate::error::GateError;
use crate::inputs::{poison_bits, to_bits, Inputs};
use crate::kernel::{pool_index, AttentionKernel, Output, TimingMethod};
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
    /// Returns at once when its O already holds values (not the poison).
    PeeksAtOutput,
    /// Skips a set whose buffers it has seen before, unless it is the set it ran last.
    MemoByPointer,
    /// Computes on its first 64 launches, then only on every k-th.
    EveryKth(u32),
}

/// What a timed set's O holds: the poison, or the result of the kernel on a pool entry
/// (computed lazily when the outputs are read, so a repeat costs nothing on the CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetState {
    Poison,
    Computed(usize),
}

pub struct FakeKernel {
    pub behaviour: Behaviour,
    first: Option<Vec<u16>>,
    prepared: Option<Problem>,
    pool: Vec<Inputs>,
    /// Per timed set: the pool entry it holds and its O.
    sets: Vec<(usize, SetState)>,
    seen: Vec<bool>,
    last_set: Option<usize>,
    launches: u64,
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
            pool: Vec::new(),
            sets: Vec::new(),
            seen: Vec::new(),
            last_set: None,
            launches: 0,
            call_us: 20.0,
            graph_fails: false,
            timed_with: Vec::new(),
        }
    }
}

const TILE: usize = 64;

impl FakeKernel {
    /// One simulated timed launch of set `set`: what its O holds afterwards.
    fn launch(&mut self, set: usize) {
        let (entry, state) = self.sets[set];
        let n = self.launches;
        self.launches += 1;
        let skip = match self.behaviour {
            Behaviour::PeeksAtOutput => state != SetState::Poison,
            Behaviour::MemoByPointer => self.seen[set] && self.last_set != Some(set),
            Behaviour::EveryKth(k) => n >= 64 && !n.is_multiple_of(k as u64),
            _ => false,
        };
        self.seen[set] = true;
        self.last_set = Some(set);
        if !skip {
            self.sets[set].1 = SetState::Computed(entry);
        }
    }

    /// The arithmetic of the behaviour (the cheats compute correctly when they do).
    fn arithmetic(&self) -> Behaviour {
        match self.behaviour {
            Behaviour::PeeksAtOutput | Behaviour::MemoByPointer | Behaviour::EveryKth(_) => {
                Behaviour::Correct
            }
            b => b,
        }
    }
}

fn with_guard(o: Vec<u16>) -> Output {
    Output {
        o,
        guard_breach: None,
    }
}

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

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        self.launches += 1;
        if self.behaviour == Behaviour::ReusesFirstResult {
            if let Some(first) = self
                .first
                .as_ref()
                .filter(|f| f.len() == inputs.problem.q_elems())
            {
                return Ok(with_guard(first.clone()));
            }
            let out = attention(inputs, Behaviour::Correct);
            self.first = Some(out.clone());
            return Ok(with_guard(out));
        }
        Ok(with_guard(attention(inputs, self.arithmetic())))
    }

    fn prepare_timing(&mut self, pool: &[&Inputs], sets: usize) -> Result<(), GateError> {
        self.prepared = pool.first().map(|i| i.problem);
        self.pool = pool.iter().map(|i| (*i).clone()).collect();
        self.sets = vec![(0, SetState::Poison); sets];
        self.seen = vec![false; sets];
        Ok(())
    }

    fn time_repeat(&mut self, repeat: usize, method: TimingMethod) -> Result<f64, GateError> {
        if method == TimingMethod::Graph && self.graph_fails {
            return Err(GateError::Driver {
                during: "capturing".into(),
                message: "not capturable".into(),
            });
        }
        self.timed_with.push(method);
        let n = self.pool.len();
        for (i, set) in self.sets.iter_mut().enumerate() {
            *set = (pool_index(i, repeat, n), SetState::Poison);
        }
        for set in 0..self.sets.len() {
            self.launch(set);
        }
        // Events pay a simulated 4 µs host gap per call; graphs do not.
        let gap = if method == TimingMethod::Events {
            4.0
        } else {
            0.0
        };
        Ok(self.sets.len() as f64 * (self.call_us + gap) / 1e3)
    }

    fn timed_outputs(&mut self) -> Result<Vec<Output>, GateError> {
        let behaviour = self.arithmetic();
        Ok(self
            .sets
            .iter()
            .map(|&(entry, state)| {
                let inputs = &self.pool[entry];
                with_guard(match state {
                    SetState::Poison => {
                        vec![poison_bits(inputs.problem.dtype); inputs.problem.q_elems()]
                    }
                    SetState::Computed(e) => attention(&self.pool[e], behaviour),
                })
            })
            .collect())
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
            drawn: false,
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

    fn pool(p: &Problem) -> Vec<std::sync::Arc<(Inputs, crate::reference::Reference)>> {
        GreenCache::default().pool(9, 0, p).unwrap()
    }

    #[test]
    fn fast_uses_graphs_for_small_calls_and_falls_back_to_events() {
        let p = small_suite()[2].problem;
        let pool = pool(&p);
        assert_eq!(pool.len(), crate::fast::input_sets(&p) + 1);
        let mut k = FakeKernel::new(Behaviour::Correct);
        let f = time_problem(&mut k, &pool, &FastOptions::default()).unwrap();
        let t = &f.timing;
        assert_eq!(t.method, "graph");
        assert!(
            (t.median_us - 20.0).abs() < 1e-9,
            "graph replay has no host gaps"
        );
        assert_eq!(
            t.launches_per_repeat as usize,
            pool.len() - 1,
            "each set launched once per repeat"
        );
        assert_eq!(t.repeats, 20);
        assert_eq!(f.failure(), None);
        assert_eq!(f.checks.len(), pool.len() - 1);

        let mut k = FakeKernel::new(Behaviour::Correct);
        k.graph_fails = true;
        let t = time_problem(&mut k, &pool, &FastOptions::default())
            .unwrap()
            .timing;
        assert_eq!(t.method, "events");
        assert!((t.median_us - 24.0).abs() < 1e-9);

        let mut k = FakeKernel::new(Behaviour::Correct);
        k.call_us = 5000.0;
        let t = time_problem(&mut k, &pool, &FastOptions::default())
            .unwrap()
            .timing;
        assert_eq!(t.method, "events");
        assert!(!k.timed_with.contains(&TimingMethod::Graph));
        let tight = FastOptions {
            budget_ms: 12.0,
            ..FastOptions::default()
        };
        let t = time_problem(&mut k, &pool, &tight).unwrap().timing;
        assert_eq!(t.repeats, 3, "over budget: never fewer than 3 repeats");
    }

    #[test]
    fn fast_fails_kernels_that_skip_timed_work_and_names_the_check() {
        let p = small_suite()[2].problem;
        let pool = pool(&p);
        // Every O is poisoned before every repeat, so a peek at O never finds a result:
        // the peeking kernel computes on every timed launch and passes, timed honestly.
        let mut k = FakeKernel::new(Behaviour::PeeksAtOutput);
        let f = time_problem(&mut k, &pool, &FastOptions::default()).unwrap();
        assert_eq!(f.failure(), None);
        for cheat in [Behaviour::MemoByPointer, Behaviour::EveryKth(4)] {
            assert!(green(cheat).passed(), "{cheat:?} computes during GREEN");
            let mut k = FakeKernel::new(cheat);
            let f = time_problem(&mut k, &pool, &FastOptions::default()).unwrap();
            let why = f
                .failure()
                .unwrap_or_else(|| panic!("{cheat:?} passed FAST"));
            assert!(why.starts_with("FAST verification"), "{why}");
            assert!(why.contains("never written"), "{cheat:?}: {why}");
        }
    }

    #[test]
    fn consecutive_repeats_refill_every_set_with_other_inputs() {
        let n = 7;
        for repeat in 0..20 {
            let now: Vec<usize> = (0..n - 1).map(|s| pool_index(s, repeat, n)).collect();
            let mut distinct = now.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                n - 1,
                "sets of one repeat hold distinct inputs"
            );
            for (s, &i) in now.iter().enumerate() {
                assert_ne!(i, pool_index(s, repeat + 1, n));
            }
        }
    }

    #[test]
    fn a_store_past_the_end_fails_green_with_the_region() {
        let c = &small_suite()[0];
        let inputs = Inputs::random(&c.problem, 1, 1.0);
        let refs = crate::reference::reference(&inputs).unwrap();
        let mut out = with_guard(attention(&inputs, Behaviour::Correct));
        assert_eq!(crate::green::judge(&inputs, &out, &refs).failure, None);
        let mut guard = vec![crate::inputs::GUARD_BITS; crate::inputs::GUARD_ELEMS];
        guard[3] = 0;
        out.guard_breach = crate::inputs::guard_breach("O", &guard, crate::inputs::GUARD_BITS);
        let why = crate::green::judge(&inputs, &out, &refs).failure.unwrap();
        assert!(why.contains("wrote past the end of O"), "{why}");
        assert!(why.contains("1 of the 16384 guard elements"), "{why}");
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
    fn a_kernel_that_stops_working_after_green_fails_fast_verification() {
        let mut k = FakeKernel::new(Behaviour::EveryKth(1_000_000));
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
            e.detail.starts_with("passed GREEN but failed on")
                && e.detail.contains("FAST verification"),
            "{}",
            e.detail
        );
        assert!(e.timings.is_empty() && e.score_us.is_none());
    }
}
