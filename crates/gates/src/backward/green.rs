//! GREEN for the backward: dQ, dK and dV of a kernel against the CPU reference, on the
//! forward's GREEN suite (every problem kind, head dim and dtype, odd lengths, large
//! logits) plus the shapes drawn from the run's seed.
//!
//! Per case, two launches on inputs drawn from two seeds (a kernel that reuses an
//! earlier call's results fails the second); each launch:
//! - every output poisoned before the call, and every element of dQ, dK and dV must be
//!   written and finite (not only the rows the reference computes);
//! - every buffer, inputs and workspace included, followed by a guard that must stay;
//! - Q, K, V, O, dO and lse read back unchanged;
//! - the rows of [`sampled_gradients`] (all of them on small problems) within the
//!   per-dtype limits of [`BackwardTolerance`], per tensor;
//! - a kernel that declares `evo_deterministic` runs the first inputs again and must
//!   return the same bits.

use super::inputs::BackwardInputs;
use super::reference::{sampled_gradients, HeadRows, SampledGradients};
use crate::device::{BackwardOutput, BackwardTensors, LoadedBackward};
use crate::error::GateError;
use crate::inputs::{case_key, launch_seed, poison_bits, to_f32};
use crate::suite::Case;
use crate::tolerance::{within, ErrorStats, Worst};
use evo_genome::{Dtype, HeadDim, Problem};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// A backward kernel as GREEN runs it (a loaded module, or a fake in the CPU tests).
pub trait BackwardKernel {
    fn name(&self) -> &str;
    /// True when the kernel says its results are bitwise repeatable.
    fn deterministic(&self) -> bool;
    /// True when the kernel has a variant for the problem's head dim and dtype.
    fn supports(&self, p: &Problem) -> bool;
    fn run(&mut self, t: &BackwardTensors) -> Result<BackwardOutput, GateError>;
}

impl BackwardKernel for LoadedBackward {
    fn name(&self) -> &str {
        LoadedBackward::name(self)
    }
    fn deterministic(&self) -> bool {
        self.module().deterministic()
    }
    fn supports(&self, _: &Problem) -> bool {
        true
    }
    fn run(&mut self, t: &BackwardTensors) -> Result<BackwardOutput, GateError> {
        self.run_once(t)
    }
}

/// One backward design compiled per (head dim, dtype), as GREEN's suite needs it.
pub struct BackwardVariants {
    pub name: String,
    pub variants: Vec<((HeadDim, Dtype), LoadedBackward)>,
}

impl BackwardVariants {
    /// The variant compiled for the problem's head dim and dtype.
    pub fn get(&mut self, p: &Problem) -> Option<&mut LoadedBackward> {
        self.variants
            .iter_mut()
            .find(|(key, _)| *key == (p.head_dim, p.dtype))
            .map(|(_, k)| k)
    }
}

impl BackwardKernel for BackwardVariants {
    fn name(&self) -> &str {
        &self.name
    }
    fn deterministic(&self) -> bool {
        self.variants
            .iter()
            .all(|(_, k)| k.module().deterministic())
    }
    fn supports(&self, p: &Problem) -> bool {
        self.variants
            .iter()
            .any(|(key, _)| *key == (p.head_dim, p.dtype))
    }
    fn run(&mut self, t: &BackwardTensors) -> Result<BackwardOutput, GateError> {
        let p = t.problem;
        let name = self.name.clone();
        self.get(&p)
            .ok_or_else(|| {
                GateError::Abi(format!(
                    "{name} has no variant compiled for D{} {}",
                    p.head_dim, p.dtype
                ))
            })?
            .run_once(t)
    }
}

/// The limits each gradient must meet: the relative Frobenius error over the compared
/// rows, and the largest absolute error relative to the reference's largest |value| in
/// those rows (a gradient's scale grows with the lengths, so an absolute limit would
/// be too loose on short rows and too tight on long ones).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BackwardTolerance {
    pub rel_frob: f64,
    pub rel_max_abs: f64,
}

impl BackwardTolerance {
    /// The limits per dtype, about 4–5x the worst error trusted kernels show against a
    /// reference on the same inputs, as the forward's limits are:
    ///
    /// | dtype | fa2-bwd (GREEN, run G1) rel. Frobenius / rel. max abs | PyTorch cuDNN, flash vs float64 | limits |
    /// |---|---|---|---|
    /// | f16  | 3.3e-4 / 6.5e-4 | 2.9e-4–3.9e-4 | 1.5e-3 / 3e-3 |
    /// | bf16 | 2.5e-3 / 5.6e-3 | — | 1.2e-2 / 2.5e-2 |
    ///
    /// (experiments/2026-11-26-h100-bwd-gate: 31 cases of every kind, every tensor;
    /// experiments/2026-11-26-h100-bwd-baselines: PyTorch's backward against float64.)
    /// As in the forward, the error is the 16-bit rounding of the outputs (and of P and
    /// dS as tensor-core operands): a kernel that drops one query's contribution to a
    /// key's gradient already misses by orders of magnitude.
    pub fn for_dtype(dtype: Dtype) -> BackwardTolerance {
        match dtype {
            Dtype::F16 => BackwardTolerance {
                rel_frob: 1.5e-3,
                rel_max_abs: 3e-3,
            },
            Dtype::Bf16 => BackwardTolerance {
                rel_frob: 1.2e-2,
                rel_max_abs: 2.5e-2,
            },
        }
    }
}

/// The errors of one gradient tensor of one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorCheck {
    pub tensor: String,
    pub rel_frob: f64,
    pub max_abs: f64,
    pub ref_max_abs: f64,
    pub rows: usize,
    /// Where the largest error is.
    pub worst: Option<Worst>,
    /// The first element not written or not finite: its index in the tensor.
    pub unwritten: Option<usize>,
}

impl TensorCheck {
    pub fn violations(&self, tol: &BackwardTolerance) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(at) = self.unwritten {
            v.push(format!(
                "{}: element {at} not written or not finite",
                self.tensor
            ));
        }
        if !within(self.rel_frob, tol.rel_frob) {
            v.push(format!(
                "{}: relative Frobenius error {:.3e} > {:.1e}",
                self.tensor, self.rel_frob, tol.rel_frob
            ));
        }
        let limit = tol.rel_max_abs * self.ref_max_abs.max(1e-6);
        if !within(self.max_abs, limit) {
            let at = self.worst.map_or(String::new(), |w| {
                format!(
                    " at (b {}, head {}, row {}, col {}): {} vs {}",
                    w.b, w.h, w.row, w.col, w.got, w.expected
                )
            });
            v.push(format!(
                "{}: max abs error {:.3e} > {:.1e} x max |ref| {:.3e}{at}",
                self.tensor, self.max_abs, tol.rel_max_abs, self.ref_max_abs
            ));
        }
        v
    }
}

/// One launch's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackwardLaunch {
    pub seed: u64,
    pub tensors: Vec<TensorCheck>,
    /// Guards, inputs, repeatability: what failed besides the errors.
    pub faults: Vec<String>,
}

/// One case's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackwardCaseReport {
    pub case: String,
    pub problem: Problem,
    pub launches: Vec<BackwardLaunch>,
    /// Why the case was not run (no variant for its head dim and dtype).
    pub skipped: Option<String>,
    pub failures: Vec<String>,
}

impl BackwardCaseReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The worst relative Frobenius error of each tensor over the launches.
    pub fn worst_rel_frob(&self) -> [f64; 3] {
        let mut out = [0.0f64; 3];
        for l in &self.launches {
            for (i, t) in l.tensors.iter().enumerate().take(3) {
                out[i] = out[i].max(t.rel_frob);
            }
        }
        out
    }
}

/// Compares one tensor's outputs with the reference rows. `heads` are the reference's
/// rows per head (`b·heads_per_batch + h`); `all` every element the kernel wrote.
fn check_tensor(
    name: &str,
    p: &Problem,
    all: &[u16],
    heads: &[HeadRows],
    heads_per_batch: u32,
    len: u32,
) -> TensorCheck {
    let d = p.head_dim.get() as usize;
    let poison = poison_bits(p.dtype);
    let unwritten = all
        .iter()
        .position(|&b| b == poison || !to_f32(p.dtype, b).is_finite());
    let mut stats = ErrorStats::default();
    let mut ref_max = 0.0f64;
    let mut rows = 0;
    for (bh, head) in heads.iter().enumerate() {
        let (b, h) = (bh as u32 / heads_per_batch, bh as u32 % heads_per_batch);
        for (r, &row) in head.rows.iter().enumerate() {
            let at = (bh * len as usize + row as usize) * d;
            let expected = &head.values[r * d..(r + 1) * d];
            ref_max = expected.iter().fold(ref_max, |m, &x| m.max(x.abs() as f64));
            stats.add_row(
                (b, h, row),
                &all[at..at + d],
                |bits| to_f32(p.dtype, bits),
                expected,
            );
            rows += 1;
        }
    }
    TensorCheck {
        tensor: name.to_string(),
        rel_frob: stats.rel_frob(),
        max_abs: stats.max_abs,
        ref_max_abs: ref_max,
        rows,
        worst: stats.worst,
        unwritten,
    }
}

fn tensors(inputs: &BackwardInputs) -> BackwardTensors<'_> {
    BackwardTensors {
        problem: inputs.problem,
        q: &inputs.q,
        k: &inputs.k,
        v: &inputs.v,
        o: &inputs.o,
        d_o: &inputs.d_o,
        lse: &inputs.lse,
    }
}

/// The checks of one launch's outputs on `inputs` (see the module docs).
pub fn judge(inputs: &BackwardInputs, out: &BackwardOutput) -> Result<BackwardLaunch, GateError> {
    Ok(judge_against(inputs, &sampled_gradients(inputs)?, out))
}

/// [`judge`] with the reference rows already computed.
pub fn judge_against(
    inputs: &BackwardInputs,
    refs: &SampledGradients,
    out: &BackwardOutput,
) -> BackwardLaunch {
    let p = &inputs.problem;
    let mut faults: Vec<String> = out.breach.iter().cloned().collect();
    faults.extend(out.inputs_changed.iter().cloned());
    let tensors = vec![
        check_tensor("dQ", p, &out.dq, &refs.dq, p.heads, p.q_len),
        check_tensor("dK", p, &out.dk, &refs.dk, p.kv_heads(), p.kv_len),
        check_tensor("dV", p, &out.dv, &refs.dv, p.kv_heads(), p.kv_len),
    ];
    BackwardLaunch {
        seed: inputs.seed,
        tensors,
        faults,
    }
}

/// GREEN's inputs and reference rows per (case, launch, seed): the same for every
/// candidate of a search, so the CPU computes them once per run, not once per kernel.
#[derive(Default)]
pub struct BackwardReferences {
    entries: HashMap<(String, usize, u64), Arc<(BackwardInputs, SampledGradients)>>,
}

impl BackwardReferences {
    fn get(
        &mut self,
        case: &Case,
        launch: usize,
        seed: u64,
    ) -> Result<Arc<(BackwardInputs, SampledGradients)>, GateError> {
        let key = (case.label(), launch, seed);
        if let Some(e) = self.entries.get(&key) {
            return Ok(e.clone());
        }
        let inputs = BackwardInputs::random(&case.problem, seed, case.q_gain)?;
        let refs = sampled_gradients(&inputs)?;
        let entry = Arc::new((inputs, refs));
        self.entries.insert(key, entry.clone());
        Ok(entry)
    }
}

/// Runs GREEN's backward checks on every case `kernel` has a variant for.
///
/// With `stop_at_first_failure` (a search's screening) the cases after the first that
/// fails are not run.
pub fn run_backward_green(
    kernel: &mut dyn BackwardKernel,
    cases: &[Case],
    run_seed: u64,
    stop_at_first_failure: bool,
    references: &mut BackwardReferences,
) -> Result<Vec<BackwardCaseReport>, GateError> {
    let mut reports = Vec::with_capacity(cases.len());
    for case in cases {
        let p = case.problem;
        let label = case.label();
        let mut report = BackwardCaseReport {
            case: label.clone(),
            problem: p,
            launches: Vec::new(),
            skipped: None,
            failures: Vec::new(),
        };
        if !kernel.supports(&p) {
            report.skipped = Some(format!("no variant for D{} {}", p.head_dim, p.dtype));
            reports.push(report);
            continue;
        }
        let tol = BackwardTolerance::for_dtype(p.dtype);
        let mut first: Option<(Arc<(BackwardInputs, SampledGradients)>, BackwardOutput)> = None;
        for launch in 0..2 {
            let seed = launch_seed(run_seed, case_key(&label), launch);
            let entry = references.get(case, launch, seed)?;
            let (inputs, refs) = (&entry.0, &entry.1);
            let out = kernel.run(&tensors(inputs))?;
            let verdict = judge_against(inputs, refs, &out);
            for f in &verdict.faults {
                report.failures.push(format!("launch {launch}: {f}"));
            }
            for t in &verdict.tensors {
                for v in t.violations(&tol) {
                    report.failures.push(format!("launch {launch}: {v}"));
                }
            }
            report.launches.push(verdict);
            if launch == 0 {
                first = Some((entry.clone(), out));
            }
        }
        if kernel.deterministic() {
            let (entry, out) = first.expect("launch 0 ran");
            let again = kernel.run(&tensors(&entry.0))?;
            for (name, a, b) in [
                ("dQ", &out.dq, &again.dq),
                ("dK", &out.dk, &again.dk),
                ("dV", &out.dv, &again.dv),
            ] {
                if let Some(at) = a.iter().zip(b).position(|(x, y)| x != y) {
                    report.failures.push(format!(
                        "declares evo_deterministic but {name} differs at element {at} \
                         between two runs on the same inputs"
                    ));
                }
            }
        }
        let failed = !report.passed();
        reports.push(report);
        if failed && stop_at_first_failure {
            break;
        }
    }
    Ok(reports)
}
