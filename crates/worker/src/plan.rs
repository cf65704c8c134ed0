//! What a GPU search measures and how: the plan every compile and every request follows.

use evo_gates::Case;
use evo_genome::Problem;
use std::path::PathBuf;
use std::time::Duration;

/// What the search measures and how.
#[derive(Debug, Clone)]
pub struct GpuPlan {
    /// GREEN's cases; those a genome cannot be built for (a resource rule at that head
    /// dim) are skipped for that genome and named in its record.
    pub green_cases: Vec<Case>,
    /// The full gate a new best must pass before it is crowned (the fixed cases and
    /// the shapes drawn from `seed`); empty: the screen is the only gate.
    pub full_gate: Vec<Case>,
    /// The shapes FAST times; the score is their geometric mean.
    pub objective: Vec<Problem>,
    /// Base of every input seed; candidate n of the run uses `seed + n`.
    pub seed: u64,
    /// Longest a worker may take over one candidate.
    pub timeout: Duration,
    /// Where CUBINs are written for the worker.
    pub cubin_dir: PathBuf,
    /// Where compiled CUBINs are kept across runs (see `CubinCache`); none: every
    /// variant is compiled.
    pub cubin_cache: Option<PathBuf>,
    /// Compile threads; none: `default_compile_threads` (one per core but one; with
    /// several GPUs, half the cores but one). A host running several searches at once
    /// gives each its share of the cores, so that one search's compiles never starve
    /// another's workers.
    pub compile_threads: Option<usize>,
    /// The fault drill: replace some candidates' kernels with planted faulting or
    /// hanging ones (None in every real search).
    pub plant: Option<Plant>,
}

/// The fault drill: every `every`-th candidate sent to the worker runs one of the
/// planted kernels (in turn) instead of its own, to prove that a kernel which faults
/// or hangs costs only its own evaluation. Records of planted candidates say so.
#[derive(Debug, Clone)]
pub struct Plant {
    pub every: usize,
    /// Hand-written ABI kernels (tests/faults/*.cu): (path, source text).
    pub kernels: Vec<(String, String)>,
}
