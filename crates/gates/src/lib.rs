//! The gates: GREEN (is it right?) and FAST (how fast?), on the GPU.

pub mod outcome;

pub use outcome::{Evaluation, Resources, Status, Timing};
