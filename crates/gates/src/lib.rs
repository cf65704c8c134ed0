//! The gates: GREEN (is it right?) and FAST (how fast?), on the GPU.
//!
//! Layers, bottom up: [`device`] is the CUDA boundary (cudarc driver + cuBLAS; the
//! only `unsafe`), with the device's own input generator and fp32 reference;
//! [`kernel::AttentionKernel`] is what the gates run over (a loaded CUBIN, the cuBLAS
//! hybrid, or a fake CPU kernel in the tests); [`philox`] draws every input, on the
//! host or the device alike; [`reference`] is candle's CPU attention; [`verify`] turns
//! a launch's rows into a verdict and holds the device reference to candle's;
//! [`green`] and [`fast`] are the gates; [`evaluate`] turns one kernel into the
//! [`Evaluation`] record the search stores; [`report`] is the per-(kernel, case) JSON
//! row and the table of `evo gate` / `evo bench`.

pub mod backward;
pub mod baselines;
pub mod compile;
pub mod device;
pub mod error;
pub mod evaluate;
pub mod family;
pub mod fast;
pub mod green;
pub mod inputs;
pub mod kernel;
pub mod lse;
pub mod lse_twin;
pub mod philox;
pub use evo_record as outcome;
pub mod profile;
pub mod reference;
pub mod report;
pub mod suite;
pub mod tolerance;
pub mod verify;

#[cfg(test)]
mod fake;
#[cfg(all(test, feature = "gpu"))]
mod gpu_tests;
#[cfg(all(test, feature = "gpu"))]
mod verdicts;

pub use device::{Device, Geometry, HybridKernel, LoadedKernel};
pub use error::GateError;
pub use evaluate::{evaluate, EvalOptions};
pub use family::KernelFamily;
pub use fast::{time_problem, FastOptions};
pub use green::{run_green, GreenOptions, GreenReport};
pub use kernel::{AttentionKernel, TimingMethod};
pub use outcome::{Evaluation, Resources, Status, Timing};
pub use suite::{Case, GreenSuite, TimingSuite};
pub use tolerance::Tolerance;
