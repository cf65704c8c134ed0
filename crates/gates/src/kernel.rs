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
    /// Back-to-back launches from the host between two events.
    Events,
    /// The launches captured once in a CUDA graph, the graph replayed between two events
    /// (no host launch gaps: what small shapes need).
    Graph,
}

impl TimingMethod {
    pub fn label(self) -> &'static str {
        match self {
            TimingMethod::Events => "events",
            TimingMethod::Graph => "graph",
        }
    }
}

/// An attention implementation the gates can check and time.
pub trait AttentionKernel {
    /// A name for reports (`v6a`, `tests/kernels/zeros.cu`, `cublas-hybrid`).
    fn name(&self) -> &str;

    /// One checked call: the output is filled with [`crate::inputs::poison_bits`]
    /// before the launch, then the kernel runs on `inputs` and the whole output comes
    /// back as 16-bit elements (so unwritten elements are recognised by their bits).
    fn run_once(&mut self, inputs: &Inputs) -> Result<Vec<u16>, GateError>;

    /// Makes `sets` resident copies of `inputs` (distinct buffers, so that rotating
    /// among them keeps the inputs out of L2) for the timed calls that follow.
    fn prepare_timing(&mut self, inputs: &Inputs, sets: usize) -> Result<(), GateError>;

    /// Milliseconds for `calls` back-to-back calls on the prepared problem, rotating
    /// among the prepared input sets.
    fn time_calls(&mut self, calls: u32, method: TimingMethod) -> Result<f64, GateError>;

    /// The problem the kernel was last prepared for, if any.
    fn prepared(&self) -> Option<Problem>;
}
