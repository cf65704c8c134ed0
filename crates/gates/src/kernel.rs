//! What the gates run over: anything that computes attention for a [`Problem`].
//!
//! GREEN and FAST are written against this trait, not against the device, so their
//! logic is tested on the CPU with fake kernels (cubecl's `tests/dummy` idea); on the
//! GPU the implementations are [`crate::device::LoadedKernel`] (a CUBIN following the
//! ABI) and [`crate::baselines::CublasHybrid`].

use crate::error::GateError;
use crate::inputs::Inputs;
use evo_genome::Problem;
use serde::{Deserialize, Serialize};

/// How a FAST repeat is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingMethod {
    /// Back-to-back launches from the host between two events, after L2 was read over
    /// (none of the inputs just drawn is cached, and no dirty line waits).
    Events,
    /// The launches captured once in a CUDA graph, the graph replayed between two events
    /// (no host launch gaps: what small shapes need).
    Graph,
    /// Each launch alone between two events, after a read over twice the L2's size:
    /// nothing it reads is in L2 when it starts (how a layer runs after other layers),
    /// and no dirty line waits to be written back.
    ColdL2,
}

impl TimingMethod {
    pub fn label(self) -> &'static str {
        match self {
            TimingMethod::Events => "events",
            TimingMethod::Graph => "graph",
            TimingMethod::ColdL2 => "cold-l2",
        }
    }
}

/// What one call left in device memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// O as 16-bit elements, B·H·Lq·D of them.
    pub o: Vec<u16>,
    /// Set when the call wrote past the end of O or of the split-KV workspace (the
    /// guard regions after them no longer hold their pattern): where and how much.
    pub guard_breach: Option<String>,
}

/// One launch of a FAST repeat: the inputs it computes on, drawn on the device from
/// `seed` by the generator of [`crate::philox`] (unit gain), and the slots of the
/// resident buffers that hold its Q, K, V and O. FAST draws the slots of each tensor as
/// independent permutations every repeat, so a launch's arguments say nothing about
/// which Q goes with which K, V and O in any other launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub seed: u64,
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub o: usize,
}

impl Draw {
    /// A single launch's draw: the inputs of `seed` in slot 0 of every tensor, where a
    /// run outside FAST's repeats uploads them.
    pub fn first(seed: u64) -> Draw {
        Draw {
            seed,
            q: 0,
            k: 0,
            v: 0,
            o: 0,
        }
    }
}

/// One FAST repeat: launch `i` computes on `draws[i]`. Afterwards every O is copied
/// aside, to the kept archive when `keep` (the repeat FAST checks in full after the
/// timing) or to a scratch one otherwise, so every repeat costs and looks the same.
#[derive(Debug, Clone, Copy)]
pub struct RepeatPlan<'a> {
    pub draws: &'a [Draw],
    pub keep: bool,
}

/// A launch FAST asks to have checked: its draw, whether its output is read from the
/// kept archive (else from the live O slots, right after its repeat or after the last
/// one), and the rows (`bh·Lq + row`) whose reference values should come back for the
/// comparison with candle's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRequest {
    pub draw: Draw,
    pub archived: bool,
    pub reference_rows: Vec<u32>,
}

/// What checking one launch on the device found.
#[derive(Debug, Clone)]
pub struct RowCheck {
    /// Every row of the output against the device's fp32 reference.
    pub stats: crate::verify::LaunchStats,
    /// The device reference at the rows asked for, D values each.
    pub reference_at: Vec<f32>,
    pub findings: crate::verify::Findings,
}

/// An attention implementation the gates can check and time.
pub trait AttentionKernel {
    /// A name for reports (`v6a`, `tests/kernels/zeros.cu`, `cublas-hybrid`).
    fn name(&self) -> &str;

    /// Whether the kernel's ABI can state `problem` (a kernel of the first ABI states
    /// only multi-head attention with a top-left causal mask or none); the reason if not.
    /// GREEN skips, and names, the cases a kernel cannot state.
    fn states(&self, _problem: &Problem) -> Result<(), String> {
        Ok(())
    }

    /// One checked call: the output is filled with [`crate::inputs::poison_bits`]
    /// (and the guard regions after it with [`crate::inputs::GUARD_BITS`]) before the
    /// launch, then the kernel runs on `inputs` and the whole output comes back as
    /// 16-bit elements (so unwritten elements are recognised by their bits).
    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError>;

    /// Whether the kernel writes the forward's log-sum-exp of `problem` when asked (the
    /// variant that computes it declares `evo_lse`, kernels/ABI.md): GREEN then checks
    /// it on every such case ([`crate::lse`]). A kernel that wraps others must answer
    /// for the one it would run.
    fn writes_lse(&self, _problem: &Problem) -> bool {
        false
    }

    /// [`AttentionKernel::run_once`] with the lse asked for: its buffer is filled with
    /// [`crate::lse::LSE_POISON_BITS`] (and the guard after it with
    /// [`crate::inputs::GUARD_F32_BITS`]) before the launch, and comes back whole.
    fn run_once_with_lse(
        &mut self,
        _inputs: &Inputs,
    ) -> Result<(Output, crate::lse::LseOutput), GateError> {
        Err(GateError::Abi(format!(
            "{} does not declare `evo_lse`: it cannot write the forward's log-sum-exp",
            self.name()
        )))
    }

    /// Every row of the last [`AttentionKernel::run_once`]'s output against a reference
    /// the device computes from `inputs`' seed and gain (drawn again, not read back
    /// from buffers the kernel could have written), with the reference's values at
    /// `reference_rows`. `None` when there is no device to do it (the CPU fakes without
    /// one): GREEN then judges on the CPU reference's rows alone.
    fn check_last_run(
        &mut self,
        _inputs: &Inputs,
        _reference_rows: &[u32],
    ) -> Result<Option<RowCheck>, GateError> {
        Ok(None)
    }

    /// Makes `sets` resident input slots per tensor and as many outputs.
    fn prepare_timing(&mut self, problem: &Problem, sets: usize) -> Result<(), GateError>;

    /// One repeat of FAST: outside the timed region every input slot a draw names is
    /// drawn anew on the device and every O (and the split-KV workspace) is poisoned;
    /// then launch `i` runs on `plan.draws[i]`, all of them between two events; then
    /// every O is copied aside (see [`RepeatPlan`]) and the guards after every O and
    /// the workspace are checked. Milliseconds for the launches.
    fn time_repeat(&mut self, plan: &RepeatPlan, method: TimingMethod) -> Result<f64, GateError>;

    /// Checks launches of the repeats timed so far, each against the device reference
    /// of its draw. A live request reads the O slot its draw names as the last repeat
    /// left it, and also finds out whether the kernel wrote into that launch's inputs.
    fn check_timed(&mut self, requests: &[CheckRequest]) -> Result<Vec<RowCheck>, GateError>;

    /// The problem the kernel was last prepared for, if any.
    fn prepared(&self) -> Option<Problem>;

    /// Runs the next launches of a persistent kernel on at most `ctas` CTAs (`None`: its
    /// whole grid, one CTA per SM times its CTAs per SM). kernels/ABI.md lets a
    /// persistent kernel be launched on any grid; GREEN caps it on half its launches,
    /// so its small problems take the loop over several tiles per CTA that large
    /// problems take. No effect on a kernel that is not persistent.
    fn cap_persistent_grid(&mut self, _ctas: Option<u32>) {}

    /// FAST checked the launches it chose and all were right: the timing slots may be
    /// handed to the next kernel timed on this device (see `LoadedKernel`). Never
    /// called when a check failed, so slots a kernel may have written outside of are
    /// not reused.
    fn timing_verified(&mut self) {}
}
