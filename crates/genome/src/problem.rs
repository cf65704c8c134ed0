//! The attention problem a kernel is built and judged for.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Head dimension: the template is specialised at compile time for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub enum HeadDim {
    D64,
    D128,
}

impl HeadDim {
    pub const ALL: [HeadDim; 2] = [HeadDim::D64, HeadDim::D128];

    pub fn get(self) -> u32 {
        match self {
            HeadDim::D64 => 64,
            HeadDim::D128 => 128,
        }
    }
}

impl TryFrom<u32> for HeadDim {
    type Error = String;
    fn try_from(v: u32) -> Result<Self, String> {
        match v {
            64 => Ok(HeadDim::D64),
            128 => Ok(HeadDim::D128),
            other => Err(format!("head_dim {other} is not supported; use 64 or 128")),
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

/// Element type of Q, K, V and O (accumulation is always fp32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F16,
    Bf16,
}

impl Dtype {
    pub const ALL: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];

    pub fn label(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One attention call: tensors are contiguous `[B, H, L, D]` as in PyTorch's SDPA,
/// scale `1/sqrt(D)`, causal masking top-left aligned (query i sees keys j <= i).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub batch: u32,
    pub heads: u32,
    pub q_len: u32,
    pub kv_len: u32,
    pub head_dim: HeadDim,
    pub dtype: Dtype,
    #[serde(default)]
    pub causal: bool,
}

impl Problem {
    /// The seeds' shape: B=1 H=8 L=512 D=64, f16, not causal.
    pub fn seed() -> Problem {
        Problem {
            batch: 1,
            heads: 8,
            q_len: 512,
            kv_len: 512,
            head_dim: HeadDim::D64,
            dtype: Dtype::F16,
            causal: false,
        }
    }

    /// The `B,H,Lq,Lk,D,dtype[,causal]` form the parser reads back.
    pub fn spec(&self) -> String {
        format!(
            "{},{},{},{},{},{}{}",
            self.batch,
            self.heads,
            self.q_len,
            self.kv_len,
            self.head_dim.get(),
            self.dtype.label(),
            if self.causal { ",causal" } else { "" }
        )
    }

    /// Floating-point operations of the two products: 4·B·H·Lq·Lk·D, halved for causal
    /// (the convention of FlashAttention's and PyTorch's benchmarks).
    pub fn flops(&self) -> f64 {
        let full = 4.0
            * self.batch as f64
            * self.heads as f64
            * self.q_len as f64
            * self.kv_len as f64
            * self.head_dim.get() as f64;
        if self.causal {
            full / 2.0
        } else {
            full
        }
    }

    /// Multiply-adds of one of the two products, B·H·Lq·Lk·D, mask ignored (the size
    /// by which the gates choose how to check a launch).
    pub fn macs(&self) -> u64 {
        self.batch as u64
            * self.heads as u64
            * self.q_len as u64
            * self.kv_len as u64
            * self.head_dim.get() as u64
    }

    /// Elements of Q (and of O).
    pub fn q_elems(&self) -> usize {
        self.batch as usize
            * self.heads as usize
            * self.q_len as usize
            * self.head_dim.get() as usize
    }

    /// Elements of K (and of V).
    pub fn kv_elems(&self) -> usize {
        self.batch as usize
            * self.heads as usize
            * self.kv_len as usize
            * self.head_dim.get() as usize
    }

    /// Checks the sizes are usable; the message names the field and the fix.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("batch", self.batch),
            ("heads", self.heads),
            ("q_len", self.q_len),
            ("kv_len", self.kv_len),
        ] {
            if v == 0 {
                return Err(format!(
                    "problem field `{name}` is 0; it must be at least 1"
                ));
            }
        }
        if self.batch as u64 * self.heads as u64 > 65_535 {
            return Err(
                "problem fields `batch`·`heads` exceed 65535 (grid y limit); split the call".into(),
            );
        }
        Ok(())
    }

    /// A short label such as `B1 H8 L512 D64 f16` or `B2 H16 Lq77 Lk1000 D128 bf16 causal`.
    pub fn label(&self) -> String {
        let lens = if self.q_len == self.kv_len {
            format!("L{}", self.q_len)
        } else {
            format!("Lq{} Lk{}", self.q_len, self.kv_len)
        };
        format!(
            "B{} H{} {} D{} {}{}",
            self.batch,
            self.heads,
            lens,
            self.head_dim,
            self.dtype,
            if self.causal { " causal" } else { "" }
        )
    }
}

/// Parses `B,H,Lq,Lk,D,dtype[,causal]`, e.g. `1,8,512,512,64,f16` or `2,16,4096,4096,128,bf16,causal`.
impl std::str::FromStr for Problem {
    type Err = String;

    fn from_str(s: &str) -> Result<Problem, String> {
        const FORM: &str = "expected B,H,Lq,Lk,D,dtype[,causal], e.g. 1,8,512,512,64,f16";
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        if !(6..=7).contains(&parts.len()) {
            return Err(format!("`{s}`: {FORM}"));
        }
        let int = |i: usize, name: &str| {
            parts[i]
                .parse::<u32>()
                .map_err(|_| format!("`{s}`: {name} `{}` is not a number; {FORM}", parts[i]))
        };
        let dtype = match parts[5] {
            "f16" => Dtype::F16,
            "bf16" => Dtype::Bf16,
            other => return Err(format!("`{s}`: dtype `{other}` is not f16 or bf16")),
        };
        let causal = match parts.get(6) {
            None => false,
            Some(&"causal") => true,
            Some(other) => return Err(format!("`{s}`: `{other}` is not `causal`; {FORM}")),
        };
        let problem = Problem {
            batch: int(0, "B")?,
            heads: int(1, "H")?,
            q_len: int(2, "Lq")?,
            kv_len: int(3, "Lk")?,
            head_dim: HeadDim::try_from(int(4, "D")?).map_err(|e| format!("`{s}`: {e}"))?,
            dtype,
            causal,
        };
        problem.validate().map(|()| problem)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}
