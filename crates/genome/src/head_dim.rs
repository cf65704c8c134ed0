//! The head dimension: each kernel is compiled for one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Head dimension: the template is specialised at compile time for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub enum HeadDim {
    D64,
    /// Phi-3's head dim.
    D96,
    D128,
    /// Gemma's head dim.
    D256,
}

impl HeadDim {
    pub const ALL: [HeadDim; 4] = [HeadDim::D64, HeadDim::D96, HeadDim::D128, HeadDim::D256];

    /// The head dims a module of the first ABI states (kernels/ABI.md): a hand-written
    /// kernel written before D96 and D256 existed is judged and run on these only.
    pub const FIRST_ABI: [HeadDim; 2] = [HeadDim::D64, HeadDim::D128];

    pub fn get(self) -> u32 {
        match self {
            HeadDim::D64 => 64,
            HeadDim::D96 => 96,
            HeadDim::D128 => 128,
            HeadDim::D256 => 256,
        }
    }
}

impl TryFrom<u32> for HeadDim {
    type Error = String;
    fn try_from(v: u32) -> Result<Self, String> {
        match v {
            64 => Ok(HeadDim::D64),
            96 => Ok(HeadDim::D96),
            128 => Ok(HeadDim::D128),
            256 => Ok(HeadDim::D256),
            other => Err(format!(
                "head_dim {other} is not supported; use 64, 96, 128 or 256"
            )),
        }
    }
}

impl From<HeadDim> for u32 {
    fn from(d: HeadDim) -> u32 {
        d.get()
    }
}

impl fmt::Display for HeadDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}
