//! The wire protocol between the search and an `evo worker` child: one JSON line per
//! message, a greeting first, then a request and its answer ([`Evaluation`]) per candidate.
//!
//! [`Evaluation`]: evo_gates::Evaluation

use evo_gates::{Case, Resources};
use evo_genome::{Dtype, Genome, HeadDim, Problem, Target};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The first line a worker writes: which device it holds, or why it holds none.
#[derive(Debug, Serialize, Deserialize)]
pub enum Hello {
    Ready {
        device: String,
        target: Option<Target>,
    },
    NoDevice {
        message: String,
    },
}

/// One compiled variant of a candidate, as the worker loads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantFile {
    pub head_dim: HeadDim,
    pub dtype: Dtype,
    pub cubin: PathBuf,
}

/// One candidate for the worker: what to load, what to check, what to time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    pub name: String,
    pub genome: Genome,
    pub variants: Vec<VariantFile>,
    pub resources: Option<Resources>,
    pub green_cases: Vec<Case>,
    pub objective: Vec<Problem>,
    pub seed: u64,
    /// Time with the longer confirmation settings (a candidate about to be crowned).
    #[serde(default)]
    pub confirm: bool,
    /// The full gate's GREEN cases (fixed and drawn from the run seed), run instead of
    /// `green_cases` when the candidate is about to be crowned.
    #[serde(default)]
    pub full_gate: Vec<Case>,
}

/// Input seeds rotate over this many values: consecutive candidates see different
/// inputs, while the worker computes each seed's CPU references only once. Within one
/// check every case still runs twice, on two different input sets, into a freshly
/// poisoned output.
pub const SEED_POOL: u64 = 4;
