//! A fake device: CPU "kernels" that compute attention correctly or in one of the
//! classic wrong ways, or cheat the way a kernel could cheat the gates, so that GREEN's
//! and FAST's logic is tested without a GPU (cubecl's `tests/dummy`). Each wrong kind
//! mirrors a hand-written adversarial kernel in tests/kernels/.
//!
//! The fake keeps FAST's slots as the device does (which draw's Q, K and V each input
//! slot holds, what each O slot holds) and checks a launch as the device does: every
//! row against a full reference (candle's here, the device's fp32 one on the GPU).

use crate::error::GateError;
use crate::green::row_stats;
use crate::inputs::{poison_bits, to_bits, Inputs};
use crate::kernel::{AttentionKernel, CheckRequest, Output, RepeatPlan, RowCheck, TimingMethod};
use crate::lse::{fresh_lse, lse_output, LseOutput};
use crate::reference::{reference_at, Reference};
use crate::verify::{Findings, LaunchStats};
use evo_genome::Problem;
use std::collections::{HashMap, HashSet};

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
    /// Skips a launch into an O slot it has seen before, unless it is the slot it ran last.
    MemoByPointer,
    /// Computes on its first 64 launches, then only on every k-th.
    EveryKth(u32),
    /// Keeps every output it computed, keyed by its inputs' content, and copies it
    /// when the same inputs come back (tests/kernels/memo_content.cu).
    MemoByContent,
    /// Computes its own launch and, in the same launch, the one of the "next" slots
    /// (each tensor's slot + 1), then skips that launch when it comes: right only when
    /// slots are paired alike every repeat (tests/kernels/batch_sets.cu).
    BatchesNextSet,
    /// Skips every launch of every other timed repeat after the warm-up.
    SkipsAlternateRepeats,
    /// Correct, but wrong on one row in 4096 (b·H·Lq + row ≡ 4095) of large problems
    /// (tests/kernels/sparse_rows.cu).
    SparseRowDefect,
    /// Correct, but writes into its own K after the launch.
    WritesIntoInputs,
    /// Correct, and of the first kernel ABI: it states only multi-head attention with a
    /// top-left causal mask or none.
    FirstAbi,
    /// A persistent kernel right on a CTA's first tile and wrong (zeros) on the later
    /// ones: right whenever its grid gives every tile its own CTA, as a whole grid does
    /// on a small problem (experiments/2026-11-25-h100-chained, runs C1-C2).
    WrongPastFirstTile,
}

/// What a fake that declares `evo_lse` does with the forward's lse when asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LseBehaviour {
    Correct,
    /// Leaves the buffer as it was (declares evo_lse, never writes it).
    Unwritten,
    /// Right, but off by `f32` on one row (`b·H·Lq + row`).
    OffOnRow(usize, f32),
}

/// What a timed O slot holds: the poison, or the kernel's output on the inputs drawn
/// from these seeds (Q's, K's, V's: not the same draw when the kernel paired wrongly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OState {
    Poison,
    Computed(u64, u64, u64),
}

pub struct FakeKernel {
    pub behaviour: Behaviour,
    first: Option<Vec<u16>>,
    last_run: Option<(Inputs, Vec<u16>)>,
    prepared: Option<Problem>,
    /// Which draw's tensor each input slot holds.
    q_slots: Vec<u64>,
    k_slots: Vec<u64>,
    v_slots: Vec<u64>,
    o_slots: Vec<OState>,
    kept: Vec<OState>,
    seen_o: Vec<bool>,
    last_o: Option<usize>,
    /// Input triples met so far (MemoByContent's table; every seed met by any launch).
    met: HashSet<(u64, u64, u64)>,
    pub seeds_met: Vec<u64>,
    /// The persistent grid's cap GREEN set (`AttentionKernel::cap_persistent_grid`).
    grid_cap: Option<u32>,
    repeats: u64,
    launches: u64,
    outputs: HashMap<(u64, u64, u64), Vec<u16>>,
    /// Simulated time of one call, µs.
    pub call_us: f64,
    pub graph_fails: bool,
    pub timed_with: Vec<TimingMethod>,
    /// Checks the way the device does (every row) in GREEN's large cases.
    pub device_checks: bool,
    /// Added to the "device" reference the checks bring back (a broken device reference).
    pub reference_off: f32,
    /// Declares `evo_lse` and writes the lse so (`None`: declares none).
    pub lse: Option<LseBehaviour>,
}

impl FakeKernel {
    pub fn new(behaviour: Behaviour) -> FakeKernel {
        FakeKernel {
            behaviour,
            first: None,
            grid_cap: None,
            last_run: None,
            prepared: None,
            q_slots: Vec::new(),
            k_slots: Vec::new(),
            v_slots: Vec::new(),
            o_slots: Vec::new(),
            kept: Vec::new(),
            seen_o: Vec::new(),
            last_o: None,
            met: HashSet::new(),
            seeds_met: Vec::new(),
            repeats: 0,
            launches: 0,
            outputs: HashMap::new(),
            call_us: 20.0,
            graph_fails: false,
            timed_with: Vec::new(),
            device_checks: true,
            reference_off: 0.0,
            lse: None,
        }
    }
}

const TILE: usize = 64;

impl FakeKernel {
    /// One simulated timed launch on its draw's slots: what it costs, in calls.
    fn launch(&mut self, q: usize, k: usize, v: usize, o: usize) -> f64 {
        let n = self.launches;
        self.launches += 1;
        let sets = self.o_slots.len();
        let inputs = (self.q_slots[q], self.k_slots[k], self.v_slots[v]);
        self.seeds_met.extend([inputs.0, inputs.1, inputs.2]);
        let cost = match self.behaviour {
            Behaviour::PeeksAtOutput if self.o_slots[o] != OState::Poison => 0.0,
            Behaviour::MemoByPointer if self.seen_o[o] && self.last_o != Some(o) => 0.0,
            Behaviour::EveryKth(k) if n >= 64 && !n.is_multiple_of(k as u64) => 0.0,
            Behaviour::SkipsAlternateRepeats if self.repeats > 8 && self.repeats % 2 == 1 => 0.0,
            Behaviour::BatchesNextSet if self.o_slots[o] != OState::Poison => 0.0,
            Behaviour::BatchesNextSet => {
                let next = |i: usize| (i + 1) % sets;
                self.o_slots[next(o)] = OState::Computed(
                    self.q_slots[next(q)],
                    self.k_slots[next(k)],
                    self.v_slots[next(v)],
                );
                self.o_slots[o] = OState::Computed(inputs.0, inputs.1, inputs.2);
                // Two problems in one launch fill the GPU better than two launches.
                1.2
            }
            Behaviour::MemoByContent if self.met.contains(&inputs) => {
                self.o_slots[o] = OState::Computed(inputs.0, inputs.1, inputs.2);
                0.05
            }
            _ => {
                self.o_slots[o] = OState::Computed(inputs.0, inputs.1, inputs.2);
                1.0
            }
        };
        self.met.insert(inputs);
        self.seen_o[o] = true;
        self.last_o = Some(o);
        cost
    }

    /// The arithmetic of the behaviour (the cheats compute correctly when they do).
    fn arithmetic(&self) -> Behaviour {
        match self.behaviour {
            Behaviour::PeeksAtOutput
            | Behaviour::MemoByPointer
            | Behaviour::EveryKth(_)
            | Behaviour::MemoByContent
            | Behaviour::BatchesNextSet
            | Behaviour::SkipsAlternateRepeats
            | Behaviour::WritesIntoInputs => Behaviour::Correct,
            Behaviour::WrongPastFirstTile if self.grid_cap.is_some() => Behaviour::Zeros,
            Behaviour::WrongPastFirstTile => Behaviour::Correct,
            b => b,
        }
    }

    /// What an O slot in `state` holds, as bits.
    fn bits_of(&mut self, p: &Problem, state: OState) -> Vec<u16> {
        let OState::Computed(q, k, v) = state else {
            return vec![poison_bits(p.dtype); p.q_elems()];
        };
        let behaviour = self.arithmetic();
        self.outputs
            .entry((q, k, v))
            .or_insert_with(|| {
                let mut inputs = Inputs::random(p, q, 1.0);
                inputs.k = Inputs::random(p, k, 1.0).k;
                inputs.v = Inputs::random(p, v, 1.0).v;
                attention(&inputs, behaviour)
            })
            .clone()
    }

    /// A check as the device makes it: every row of `out` against the full reference
    /// of `inputs`, and the reference's values at `rows`.
    fn check(
        &self,
        inputs: &Inputs,
        out: &[u16],
        rows: &[u32],
        changed: Option<u64>,
    ) -> Result<RowCheck, GateError> {
        let p = inputs.problem;
        let full = reference_at(inputs, |_| (0..p.q_len).collect())?;
        let d = p.head_dim.get() as usize;
        let flat: Vec<f32> = full
            .heads
            .iter()
            .flat_map(|h| h.out.iter().copied())
            .collect();
        let reference_at = rows
            .iter()
            .flat_map(|&r| {
                flat[r as usize * d..(r as usize + 1) * d]
                    .iter()
                    .map(|x| x + self.reference_off)
            })
            .collect();
        Ok(RowCheck {
            stats: LaunchStats::from_rows(&p, &row_stats(inputs, out, &full)),
            reference_at,
            findings: Findings {
                guard_breach: None,
                inputs_changed: changed,
            },
        })
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
    if matches!(behaviour, Behaviour::Correct | Behaviour::SparseRowDefect) {
        return from_reference(inputs, behaviour);
    }
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
            let kvh = p.kv_head(bh);
            match behaviour {
                Behaviour::Zeros => o.fill(to_bits(p.dtype, 0.0)),
                Behaviour::CopiesV => {
                    for c in 0..d {
                        o[c] = to_bits(p.dtype, v[(kvh * lk + i.min(lk - 1)) * d + c]);
                    }
                }
                _ => {
                    let keys = if behaviour == Behaviour::IgnoresCausal {
                        let unmasked = Problem {
                            causal: false,
                            window_left: None,
                            window_right: None,
                            ..*p
                        };
                        unmasked.visible_keys(i as u32)
                    } else {
                        p.visible_keys(i as u32)
                    };
                    let mut keys = keys.start as usize..keys.end as usize;
                    if behaviour == Behaviour::DropsLastKey && keys.end == lk && keys.len() > 1 {
                        keys.end -= 1;
                    }
                    if keys.is_empty() {
                        o.fill(to_bits(p.dtype, 0.0));
                        continue;
                    }
                    let s: Vec<f32> = keys
                        .clone()
                        .map(|j| {
                            (0..d)
                                .map(|c| q[(bh * lq + i) * d + c] * k[(kvh * lk + j) * d + c])
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
                        let acc: f32 = keys
                            .clone()
                            .zip(&e)
                            .map(|(j, e)| e * v[(kvh * lk + j) * d + c])
                            .sum();
                        o[c] = to_bits(p.dtype, acc / l + bias);
                    }
                }
            }
        }
    }
    out
}

/// The correct output, from candle's full reference (fast enough for the large
/// cases), with the sparse rows of a large problem off by 0.1.
fn from_reference(inputs: &Inputs, behaviour: Behaviour) -> Vec<u16> {
    let p = &inputs.problem;
    let full: Reference = reference_at(inputs, |_| (0..p.q_len).collect()).expect("candle");
    let d = p.head_dim.get() as usize;
    let sparse =
        behaviour == Behaviour::SparseRowDefect && p.macs() > crate::reference::FULL_REFERENCE_MACS;
    full.heads
        .iter()
        .enumerate()
        .flat_map(|(bh, h)| {
            h.out.chunks(d).enumerate().flat_map(move |(i, row)| {
                let off = sparse && (bh * p.q_len as usize + i) % 4096 == 4095;
                row.iter()
                    .map(move |&x| to_bits(p.dtype, if off { x + 0.1 } else { x }))
                    .collect::<Vec<_>>()
            })
        })
        .collect()
}

impl AttentionKernel for FakeKernel {
    fn states(&self, problem: &Problem) -> Result<(), String> {
        if self.behaviour == Behaviour::FirstAbi && !problem.is_basic() {
            return Err("a kernel of the first ABI".into());
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "fake"
    }

    fn cap_persistent_grid(&mut self, ctas: Option<u32>) {
        self.grid_cap = ctas;
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        self.launches += 1;
        let out = if self.behaviour == Behaviour::ReusesFirstResult {
            match self
                .first
                .as_ref()
                .filter(|f| f.len() == inputs.problem.q_elems())
            {
                Some(first) => first.clone(),
                None => {
                    let out = attention(inputs, Behaviour::Correct);
                    self.first = Some(out.clone());
                    out
                }
            }
        } else {
            attention(inputs, self.arithmetic())
        };
        self.last_run = Some((inputs.clone(), out.clone()));
        Ok(with_guard(out))
    }

    fn writes_lse(&self, _problem: &Problem) -> bool {
        self.lse.is_some()
    }

    fn run_once_with_lse(&mut self, inputs: &Inputs) -> Result<(Output, LseOutput), GateError> {
        let behaviour = self
            .lse
            .ok_or_else(|| GateError::Abi("the fake declares no evo_lse".into()))?;
        let out = self.run_once(inputs)?;
        let p = &inputs.problem;
        let mut buffer = fresh_lse(p);
        if behaviour != LseBehaviour::Unwritten {
            let full = reference_at(inputs, |_| (0..p.q_len).collect())?;
            for (bh, head) in full.heads.iter().enumerate() {
                let at = bh * p.q_len as usize;
                buffer[at..at + head.lse.len()].copy_from_slice(&head.lse);
            }
        }
        match behaviour {
            LseBehaviour::OffOnRow(row, by) if row < crate::lse::lse_rows(p) => buffer[row] += by,
            _ => {}
        }
        Ok((out, lse_output(p, &buffer)))
    }

    fn check_last_run(
        &mut self,
        inputs: &Inputs,
        reference_rows: &[u32],
    ) -> Result<Option<RowCheck>, GateError> {
        if !self.device_checks {
            return Ok(None);
        }
        let (ran, out) = self
            .last_run
            .as_ref()
            .ok_or_else(|| GateError::Abi("check before a run".into()))?;
        assert_eq!(ran.seed, inputs.seed, "the check is of the last run");
        let changed = u64::from(self.behaviour == Behaviour::WritesIntoInputs) * 7;
        self.check(inputs, out, reference_rows, Some(changed))
            .map(Some)
    }

    fn prepare_timing(&mut self, problem: &Problem, sets: usize) -> Result<(), GateError> {
        self.prepared = Some(*problem);
        self.q_slots = vec![0; sets];
        self.k_slots = vec![0; sets];
        self.v_slots = vec![0; sets];
        self.o_slots = vec![OState::Poison; sets];
        self.kept = vec![OState::Poison; sets];
        self.seen_o = vec![false; sets];
        Ok(())
    }

    fn time_repeat(&mut self, plan: &RepeatPlan, method: TimingMethod) -> Result<f64, GateError> {
        if method == TimingMethod::Graph && self.graph_fails {
            return Err(GateError::Driver {
                during: "capturing".into(),
                message: "not capturable".into(),
            });
        }
        self.timed_with.push(method);
        for d in plan.draws {
            self.q_slots[d.q] = d.seed;
            self.k_slots[d.k] = d.seed;
            self.v_slots[d.v] = d.seed;
        }
        self.o_slots.fill(OState::Poison);
        let calls: f64 = plan
            .draws
            .iter()
            .map(|d| self.launch(d.q, d.k, d.v, d.o))
            .sum();
        self.repeats += 1;
        if plan.keep {
            self.kept = self.o_slots.clone();
        }
        // Events pay a simulated 4 µs host gap per call; graphs do not.
        let gap = if method == TimingMethod::Events {
            4.0
        } else {
            0.0
        };
        Ok((calls * self.call_us + plan.draws.len() as f64 * gap) / 1e3)
    }

    fn check_timed(&mut self, requests: &[CheckRequest]) -> Result<Vec<RowCheck>, GateError> {
        let p = self
            .prepared
            .ok_or_else(|| GateError::Abi("checked before prepare_timing".into()))?;
        requests
            .iter()
            .map(|r| {
                let state = if r.archived {
                    self.kept[r.draw.o]
                } else {
                    self.o_slots[r.draw.o]
                };
                let out = self.bits_of(&p, state);
                let inputs = Inputs::random(&p, r.draw.seed, 1.0);
                let changed = (!r.archived)
                    .then_some(u64::from(self.behaviour == Behaviour::WritesIntoInputs) * 7);
                self.check(&inputs, &out, &r.reference_rows, changed)
            })
            .collect()
    }

    fn prepared(&self) -> Option<Problem> {
        self.prepared
    }
}

#[cfg(test)]
mod fast_tests;
#[cfg(test)]
mod green_tests;
#[cfg(test)]
mod lse_tests;
