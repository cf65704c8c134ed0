//! What an evaluation produced: the plain records every layer above the gates stores.
//!
//! These types carry no device handle and this crate depends on no GPU library, so
//! the lineage, the cache and the replay backend read and write them without pulling
//! in cudarc or candle. The gates produce them (`evo_gates` re-exports this crate as
//! `evo_gates::outcome`).

pub mod files;
pub mod gz;

use evo_genome::{Genome, GenomeId, Problem};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How an evaluation ended. Failures are data: a search records them and moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Passed GREEN and was timed by FAST.
    Ok,
    /// Rejected by a validity rule before compiling.
    Invalid,
    /// NVRTC refused it (the log is kept in `detail`).
    CompileFailed,
    /// Ran, but the output was wrong (the GREEN report is kept in `detail`).
    GreenFailed,
    /// The launch or the context failed (illegal address, launch error, dead worker).
    RuntimeFailed,
    /// The worker did not answer in time (a hang).
    Timeout,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Invalid => "invalid",
            Status::CompileFailed => "compile_failed",
            Status::GreenFailed => "green_failed",
            Status::RuntimeFailed => "runtime_failed",
            Status::Timeout => "timeout",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One timed shape: median and spread over repeats of many back-to-back launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub problem: Problem,
    /// Median time of one call, microseconds.
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// Number of repeats the median is taken over.
    pub repeats: u32,
    /// Launches between the two events of one repeat.
    pub launches_per_repeat: u32,
    /// `events` (back-to-back launches between CUDA events) or `graph` (CUDA-graph replay).
    pub method: String,
    /// Achieved TFLOP/s at the median (4·B·H·Lq·Lk·D, halved for causal).
    pub tflops: f64,
}

/// Compiler resource figures of the forward kernel, as ptxas reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub registers: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub stack_frame: u32,
    /// Dynamic shared memory the kernel is launched with.
    pub smem_bytes: u32,
}

/// The result of evaluating one genome on one objective on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub genome_id: GenomeId,
    pub genome: Genome,
    /// Device name as the driver reports it, e.g. `NVIDIA H100 80GB HBM3`.
    pub device: String,
    /// Which GPU of the search's machine ran it (the CUDA ordinal among the GPUs the
    /// search could see), when the GPU worker pool ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_index: Option<u32>,
    pub status: Status,
    /// Objective value in microseconds (lower is better): the median on one shape, or the
    /// geometric mean of the medians over a suite. `None` unless `status` is `Ok`.
    #[serde(default)]
    pub score_us: Option<f64>,
    /// Per-shape timings behind the score.
    #[serde(default)]
    pub timings: Vec<Timing>,
    #[serde(default)]
    pub resources: Option<Resources>,
    /// Why it failed (rule, compile log excerpt, GREEN report, fault), empty when ok.
    #[serde(default)]
    pub detail: String,
    /// The gates it passed, e.g. `GREEN 12 fixed + 6 drawn cases (seed 2026)` and
    /// `FAST verified: 50 timed sets of B1 H8 L512 D64 f16` (empty for records made
    /// before gates were named, and for failures; not written when empty, so records
    /// without it read and write as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
}

impl Evaluation {
    /// A failed evaluation with its reason.
    pub fn failed(genome: Genome, device: &str, status: Status, detail: impl Into<String>) -> Self {
        Evaluation {
            genome_id: genome.id(),
            genome,
            device: device.to_string(),
            device_index: None,
            status,
            score_us: None,
            timings: Vec::new(),
            resources: None,
            detail: detail.into(),
            gates: Vec::new(),
        }
    }

    /// A passed evaluation on one shape, its one timing at `us` (a summary of
    /// measurements made elsewhere, as a training snapshot keeps them: no spread, no
    /// resources, no gate names).
    pub fn summarized(
        genome: Genome,
        device: &str,
        problem: Problem,
        us: f64,
        method: &str,
    ) -> Self {
        Evaluation {
            genome_id: genome.id(),
            genome,
            device: device.to_string(),
            device_index: None,
            status: Status::Ok,
            score_us: Some(us),
            timings: vec![Timing {
                problem,
                median_us: us,
                min_us: us,
                max_us: us,
                repeats: 1,
                launches_per_repeat: 1,
                method: method.to_string(),
                tflops: problem.flops() / (us * 1e-6) / 1e12,
            }],
            resources: None,
            detail: String::new(),
            gates: Vec::new(),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok && self.score_us.is_some()
    }
}
