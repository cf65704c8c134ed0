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

/// What one call left in device memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// O as 16-bit elements, B·H·Lq·D of them.
    pub o: Vec<u16>,
    /// Set when the call wrote past the end of O or of the split-KV workspace (the
    /// guard regions after them no longer hold their pattern): where and how much.
    pub guard_breach: Option<String>,
}

/// The pool entry input set `set` holds during timed repeat `repeat`. With a pool of
/// more entries than sets, no set holds the inputs it held in the repeat before and no
/// two sets hold the same inputs within a repeat.
pub fn pool_index(set: usize, repeat: usize, pool_len: usize) -> usize {
    (set + repeat) % pool_len.max(1)
}

/// An attention implementation the gates can check and time.
pub trait AttentionKernel {
    /// A name for reports (`v6a`, `tests/kernels/zeros.cu`, `cublas-hybrid`).
    fn name(&self) -> &str;

    /// One checked call: the output is filled with [`crate::inputs::poison_bits`]
    /// (and the guard regions after it with [`crate::inputs::GUARD_BITS`]) before the
    /// launch, then the kernel runs on `inputs` and the whole output comes back as
    /// 16-bit elements (so unwritten elements are recognised by their bits).
    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError>;

    /// Makes `sets` resident input sets with their outputs, and keeps `pool` (distinct
    /// inputs of one problem, more of them than `sets`) resident to refill them from.
    fn prepare_timing(&mut self, pool: &[&Inputs], sets: usize) -> Result<(), GateError>;

    /// One timed repeat. Outside the timed region, every set's O (and the split-KV
    /// workspace) is poisoned and set `i` is refilled with pool entry
    /// [`pool_index`]`(i, repeat, pool.len())`; then each set is launched exactly once
    /// between two events. Milliseconds for those launches.
    fn time_repeat(&mut self, repeat: usize, method: TimingMethod) -> Result<f64, GateError>;

    /// Every set's output as the last repeat left it, in set order.
    fn timed_outputs(&mut self) -> Result<Vec<Output>, GateError>;

    /// The problem the kernel was last prepared for, if any.
    fn prepared(&self) -> Option<Problem>;

    /// FAST checked every set of the last timed repeats and all were right: the
    /// timing buffers may be handed to the next kernel timed on this device (see
    /// `LoadedKernel`). Never called when a check failed, so buffers a kernel may
    /// have written outside of are not reused.
    fn timing_verified(&mut self) {}
}
