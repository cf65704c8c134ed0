//! One kernel design as the GPU runs it: a variant per (head dim, dtype), since the
//! template and hand-written files are compiled per `EVO_HEAD_DIM` and `EVO_BF16`.
//! The family dispatches each call to the variant the problem needs, so GREEN's
//! suite (both head dims, both dtypes) runs over one [`AttentionKernel`].
//!
//! A genome's variant may have its lse twin beside it (the same kernels built with
//! `EVO_LSE` = 1, kernels/ABI.md "The log-sum-exp output"): GREEN's launch with the lse
//! asked for runs on the twin, every other launch on the plain kernel.

use crate::device::LoadedKernel;
use crate::error::GateError;
use crate::inputs::Inputs;
use crate::kernel::{AttentionKernel, CheckRequest, Output, RepeatPlan, RowCheck, TimingMethod};
use crate::lse::LseOutput;
use evo_genome::{Dtype, HeadDim, Problem};

pub struct KernelFamily {
    name: String,
    variants: Vec<((HeadDim, Dtype), LoadedKernel)>,
    /// The lse twins of some variants.
    twins: Vec<((HeadDim, Dtype), LoadedKernel)>,
    /// The last launch ran on a twin: its output is the twin's to check.
    last_on_twin: bool,
    timing: Option<usize>,
}

impl KernelFamily {
    pub fn new(name: impl Into<String>) -> KernelFamily {
        KernelFamily {
            name: name.into(),
            variants: Vec::new(),
            twins: Vec::new(),
            last_on_twin: false,
            timing: None,
        }
    }

    /// Adds the lse twin of a variant: the launches that ask for the lse run on it.
    pub fn add_lse_twin(&mut self, head_dim: HeadDim, dtype: Dtype, kernel: LoadedKernel) {
        self.twins.retain(|(key, _)| *key != (head_dim, dtype));
        self.twins.push(((head_dim, dtype), kernel));
    }

    fn twin(&mut self, p: &Problem) -> Option<&mut LoadedKernel> {
        self.twins
            .iter_mut()
            .find(|(key, _)| *key == (p.head_dim, p.dtype))
            .map(|(_, k)| k)
    }

    pub fn add(&mut self, head_dim: HeadDim, dtype: Dtype, kernel: LoadedKernel) {
        self.variants.retain(|(key, _)| *key != (head_dim, dtype));
        self.variants.push(((head_dim, dtype), kernel));
    }

    /// True when a variant for the problem's head dim and dtype is loaded (whether its
    /// ABI can state the problem is [`AttentionKernel::states`]).
    pub fn supports(&self, p: &Problem) -> bool {
        self.index(p).is_some()
    }

    pub fn variant(&self, head_dim: HeadDim, dtype: Dtype) -> Option<&LoadedKernel> {
        self.variants
            .iter()
            .find(|(key, _)| *key == (head_dim, dtype))
            .map(|(_, k)| k)
    }

    fn index(&self, p: &Problem) -> Option<usize> {
        self.variants
            .iter()
            .position(|(key, _)| *key == (p.head_dim, p.dtype))
    }

    fn get(&mut self, p: &Problem) -> Result<&mut LoadedKernel, GateError> {
        let i = self.index(p).ok_or_else(|| {
            GateError::Abi(format!(
                "{} has no variant compiled for D{} {} (needed by {p})",
                self.name, p.head_dim, p.dtype
            ))
        })?;
        Ok(&mut self.variants[i].1)
    }
}

impl KernelFamily {
    fn timed_variant(&self) -> Result<usize, GateError> {
        self.timing
            .ok_or_else(|| GateError::Abi(format!("{}: timed before prepare_timing", self.name)))
    }
}

impl AttentionKernel for KernelFamily {
    fn name(&self) -> &str {
        &self.name
    }

    fn states(&self, problem: &Problem) -> Result<(), String> {
        // A problem without a variant is not the ABI's to refuse (`supports` says so).
        self.index(problem)
            .map_or(Ok(()), |i| self.variants[i].1.states(problem))
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        self.last_on_twin = false;
        self.get(&inputs.problem)?.run_once(inputs)
    }

    fn writes_lse(&self, problem: &Problem) -> bool {
        self.index(problem).is_some_and(|i| {
            self.variants[i].1.writes_lse(problem)
                || self
                    .twins
                    .iter()
                    .any(|(key, _)| *key == (problem.head_dim, problem.dtype))
        })
    }

    fn run_once_with_lse(&mut self, inputs: &Inputs) -> Result<(Output, LseOutput), GateError> {
        // A hand-written module that declares evo_lse is its own twin.
        self.last_on_twin = self.twin(&inputs.problem).is_some();
        match self.twin(&inputs.problem) {
            Some(twin) => twin.run_once_with_lse(inputs),
            None => self.get(&inputs.problem)?.run_once_with_lse(inputs),
        }
    }

    fn check_last_run(
        &mut self,
        inputs: &Inputs,
        reference_rows: &[u32],
    ) -> Result<Option<RowCheck>, GateError> {
        if self.last_on_twin {
            if let Some(twin) = self.twin(&inputs.problem) {
                return twin.check_last_run(inputs, reference_rows);
            }
        }
        self.get(&inputs.problem)?
            .check_last_run(inputs, reference_rows)
    }

    fn prepare_timing(&mut self, problem: &Problem, sets: usize) -> Result<(), GateError> {
        self.timing = self.index(problem);
        self.get(problem)?.prepare_timing(problem, sets)
    }

    fn time_repeat(&mut self, plan: &RepeatPlan, method: TimingMethod) -> Result<f64, GateError> {
        let i = self.timed_variant()?;
        self.variants[i].1.time_repeat(plan, method)
    }

    fn check_timed(&mut self, requests: &[CheckRequest]) -> Result<Vec<RowCheck>, GateError> {
        let i = self.timed_variant()?;
        self.variants[i].1.check_timed(requests)
    }

    fn prepared(&self) -> Option<Problem> {
        self.timing.and_then(|i| self.variants[i].1.prepared())
    }

    fn cap_persistent_grid(&mut self, ctas: Option<u32>) {
        for (_, v) in self.variants.iter_mut().chain(&mut self.twins) {
            v.cap_persistent_grid(ctas);
        }
    }

    fn timing_verified(&mut self) {
        if let Some(i) = self.timing {
            self.variants[i].1.timing_verified();
        }
    }
}
