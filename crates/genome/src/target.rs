//! The devices a genome is checked against: their resource limits.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A GPU architecture the space is defined for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// NVIDIA L4 and other Ada parts (the seeds' GPU).
    Sm89,
    /// NVIDIA H100 / H200 (Hopper).
    Sm90,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::Sm89, Target::Sm90];

    /// The NVRTC `--gpu-architecture` value.
    pub fn arch(self) -> &'static str {
        match self {
            Target::Sm89 => "sm_89",
            Target::Sm90 => "sm_90",
        }
    }

    /// Parses `sm_89` / `sm_90` (also `89`, `90`).
    pub fn parse(s: &str) -> Option<Target> {
        match s.trim_start_matches("sm_") {
            "89" => Some(Target::Sm89),
            "90" => Some(Target::Sm90),
            _ => None,
        }
    }

    /// From a device's compute capability.
    pub fn from_compute_capability(major: i32, minor: i32) -> Option<Target> {
        match (major, minor) {
            (8, 9) => Some(Target::Sm89),
            (9, 0) => Some(Target::Sm90),
            _ => None,
        }
    }

    /// Largest dynamic shared memory one block may opt into, in bytes.
    pub fn smem_per_block(self) -> u32 {
        match self {
            Target::Sm89 => 99 * 1024,
            Target::Sm90 => 227 * 1024,
        }
    }

    /// Registers one thread may address.
    pub fn regs_per_thread(self) -> u32 {
        255
    }

    /// Streaming multiprocessors of the reference part (L4, H100 SXM).
    pub fn sms(self) -> u32 {
        match self {
            Target::Sm89 => 58,
            Target::Sm90 => 132,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.arch())
    }
}
