//! The baselines every run is measured against, in the same process and the same way.
//!
//! - `cublas-hybrid`: the seeds' hybrid — cuBLAS strided-batched GEMM S = Q·Kᵀ (fp32
//!   out), a row softmax with the causal mask in fp32 (the kernel below, compiled by
//!   NVRTC), and P·V through cuBLAS again. It goes through GREEN and FAST exactly as a
//!   candidate does ([`crate::device::HybridKernel`]).
//! - PyTorch SDPA per backend (cuDNN, flash, efficient), by `scripts/sdpa_baseline.py`
//!   when `python3 -c 'import torch'` works: graph-timed as ANCHORS.md describes, with
//!   the same input rotation as FAST, its JSON read back here.
//! - PyTorch's backward kernels per backend, by `scripts/sdpa_backward_baseline.py`: the
//!   same CLI and rows (so [`run_sdpa`] runs it), each row with `pass` "backward" and the
//!   errors of dQ, dK, dV in `grads`.

use crate::error::GateError;
use evo_genome::{Pass, Problem};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// The hybrid's softmax: one block per row of S, fp32 throughout, 16-bit P out.
/// Compile with `-DEVO_BF16=0|1`. Masked keys (j > i when causal) get P = 0.
pub const SOFTMAX_SOURCE: &str = r#"
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if EVO_BF16
typedef __nv_bfloat16 elem_t;
__device__ __forceinline__ elem_t from_float(float x) { return __float2bfloat16(x); }
#else
typedef __half elem_t;
__device__ __forceinline__ elem_t from_float(float x) { return __float2half(x); }
#endif

__device__ float block_reduce(float v, bool is_max) {
    __shared__ float partial[32];
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? partial[lane] : (is_max ? -__int_as_float(0x7f800000) : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    __syncthreads();  // partial[] is reused by the next reduction
    return v;
}

extern "C" __global__ void evo_softmax_rows(const float* S, elem_t* P, int Lq, int Lk,
                                            int rows, int causal, float scale) {
    int row = blockIdx.x;
    if (row >= rows) return;
    int i = row % Lq;
    const float* s = S + (size_t)row * Lk;
    elem_t* p = P + (size_t)row * Lk;
    int visible = causal ? min(i + 1, Lk) : Lk;
    float m = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, s[j] * scale);
    m = block_reduce(m, true);
    float l = 0.0f;
    for (int j = threadIdx.x; j < visible; j += blockDim.x) l += expf(s[j] * scale - m);
    l = block_reduce(l, false);
    float inv = 1.0f / l;
    for (int j = threadIdx.x; j < Lk; j += blockDim.x)
        p[j] = from_float(j < visible ? expf(s[j] * scale - m) * inv : 0.0f);
}
"#;

/// One SDPA measurement as the script prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SdpaResult {
    /// `cudnn`, `flash` or `efficient`.
    pub backend: String,
    pub problem: Problem,
    pub device: String,
    /// `None` when the backend refused the shape (reason in `error`).
    pub median_us: Option<f64>,
    pub min_us: Option<f64>,
    pub max_us: Option<f64>,
    pub tflops: Option<f64>,
    /// Errors against a float64 reference on the same inputs (the tolerance calibration).
    pub rel_frob: Option<f64>,
    pub max_abs: Option<f64>,
    #[serde(default)]
    pub error: Option<String>,
    /// `graph` (replays of captured calls), `events` (single calls, for calls of 200 µs
    /// and more, as FAST times them), or `cold-l2` (single calls after L2 was
    /// overwritten); absent in the output of older scripts, which timed graphs only.
    #[serde(default = "graph_timing")]
    pub timing: String,
    /// `expanded-kv` when the backend refused grouped K/V heads and was timed on K and V
    /// expanded to every query head (outside the timing); absent otherwise.
    #[serde(default)]
    pub variant: Option<String>,
    /// The pass timed: the backward script's rows say `backward`; rows without the key
    /// (the forward script's, and every recorded one) are the forward's.
    #[serde(default = "forward_pass")]
    pub pass: Pass,
    /// Backward rows: each gradient's error against float64 autograd (`rel_frob` and
    /// `max_abs` above are the worst of the three).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grads: Option<GradErrors>,
}

/// The backward's errors per output, against float64 autograd on the same inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradErrors {
    pub dq: TensorError,
    pub dk: TensorError,
    pub dv: TensorError,
}

/// One output's error; `None` where the script found it not finite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorError {
    pub rel_frob: Option<f64>,
    pub max_abs: Option<f64>,
}

impl SdpaResult {
    /// The baseline's name in the tables: `sdpa-cudnn`, or `sdpa-efficient+expanded-kv`
    /// for a backend timed on expanded K/V (never mistaken for the backend's own rows);
    /// backward rows add `-backward` (`sdpa-cudnn-backward`), so a table holding both
    /// passes never compares a backward kernel with a forward baseline.
    pub fn name(&self) -> String {
        let pass = match self.pass {
            Pass::Forward => "",
            Pass::Backward => "-backward",
        };
        match &self.variant {
            Some(v) => format!("sdpa-{}{pass}+{v}", self.backend),
            None => format!("sdpa-{}{pass}", self.backend),
        }
    }
}

fn graph_timing() -> String {
    "graph".into()
}

fn forward_pass() -> Pass {
    Pass::Forward
}

/// True when `python3 -c 'import torch'` succeeds.
pub fn torch_available() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Runs `script` (scripts/sdpa_baseline.py, or scripts/sdpa_backward_baseline.py for the
/// backward kernels: same options, same rows) on `problems`, returns its results.
/// With `cold_l2` every backend is also timed on a cold L2 (rows with `timing` "cold-l2").
/// `backends` (`cudnn`, `flash`, ...) limits the backends run; empty: the script's own
/// default list.
pub fn run_sdpa(
    script: &Path,
    problems: &[Problem],
    seed: u64,
    cold_l2: bool,
    backends: &[&str],
) -> Result<Vec<SdpaResult>, GateError> {
    let out = Command::new("python3")
        .arg(script)
        .args(sdpa_args(problems, seed, cold_l2, backends)?)
        .output()
        .map_err(|error| GateError::Io {
            path: script.display().to_string(),
            error,
        })?;
    if !out.status.success() {
        return Err(GateError::Sdpa(format!(
            "{} exited with {}: {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_sdpa(&String::from_utf8_lossy(&out.stdout))
}

/// The scripts' command-line options for a run of [`run_sdpa`].
fn sdpa_args(
    problems: &[Problem],
    seed: u64,
    cold_l2: bool,
    backends: &[&str],
) -> Result<Vec<String>, GateError> {
    let shapes = serde_json::to_string(problems).map_err(|e| GateError::Sdpa(e.to_string()))?;
    let mut args = vec![
        "--shapes".to_string(),
        shapes,
        "--seed".to_string(),
        seed.to_string(),
    ];
    if cold_l2 {
        args.push("--cold-l2".into());
    }
    if !backends.is_empty() {
        args.push("--backends".into());
        args.push(backends.join(","));
    }
    Ok(args)
}

/// Parses the script's output: one JSON array on the last non-empty line.
pub fn parse_sdpa(stdout: &str) -> Result<Vec<SdpaResult>, GateError> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| GateError::Sdpa("the script printed nothing".into()))?;
    serde_json::from_str(line)
        .map_err(|e| GateError::Sdpa(format!("unreadable output ({e}): {line}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_options_name_the_backends_only_when_asked() {
        let seed = Problem::seed();
        let shapes = serde_json::to_string(&[seed]).unwrap();
        assert_eq!(
            sdpa_args(&[seed], 7, false, &[]).unwrap(),
            ["--shapes", shapes.as_str(), "--seed", "7"]
        );
        assert_eq!(
            sdpa_args(&[seed], 7, true, &["cudnn", "flash"]).unwrap(),
            [
                "--shapes",
                shapes.as_str(),
                "--seed",
                "7",
                "--cold-l2",
                "--backends",
                "cudnn,flash"
            ]
        );
    }

    #[test]
    fn sdpa_output_parses_including_refused_backends() {
        let text = r#"note: something
[{"backend":"cudnn","problem":{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":false},"device":"NVIDIA H100 80GB HBM3","median_us":9.4,"min_us":9.3,"max_us":9.9,"tflops":57.1,"rel_frob":0.0004,"max_abs":0.002},
 {"backend":"flash","problem":{"batch":1,"heads":8,"q_len":512,"kv_len":512,"head_dim":64,"dtype":"f16","causal":false},"device":"NVIDIA H100 80GB HBM3","median_us":null,"min_us":null,"max_us":null,"tflops":null,"rel_frob":null,"max_abs":null,"error":"No available kernel"}]
"#;
        let text = text.replace("\n {", " {");
        let r = parse_sdpa(&text).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].problem, Problem::seed());
        assert_eq!(r[1].median_us, None);
        assert!(r[1].error.as_deref().unwrap().contains("No available"));
        assert_eq!(r[0].pass, Pass::Forward);
        assert_eq!(r[0].name(), "sdpa-cudnn");
        assert_eq!(r[0].grads, None);
        assert!(parse_sdpa("").is_err());
        assert!(parse_sdpa("not json")
            .unwrap_err()
            .to_string()
            .contains("unreadable"));
    }

    /// A row of scripts/sdpa_backward_baseline.py as it printed it on the H100
    /// (experiments/2026-11-26-h100-bwd-baselines), with the keys this struct does not
    /// keep (lse_shape, empty_row_lse, ...) left in.
    #[test]
    fn backward_rows_parse_with_their_pass_and_gradient_errors() {
        let text = r#"[{"backend": "cudnn", "pass": "backward", "problem": {"batch": 1, "heads": 8, "q_len": 512, "kv_len": 512, "head_dim": 64, "dtype": "f16", "causal": false}, "device": "NVIDIA H100 80GB HBM3", "median_us": 24.379734198252358, "min_us": 24.320001072353786, "max_us": 24.41671159532335, "tflops": 55.05299069651928, "rel_frob": 0.00029955001146091755, "max_abs": 0.00036375151892020785, "error": null, "timing": "graph", "grads": {"dq": {"rel_frob": 0.00029955001146091755, "max_abs": 0.00036375151892020785}, "dk": {"rel_frob": 0.0002946207072710536, "max_abs": 0.0002781572115727604}, "dv": {"rel_frob": 0.0002934139978103065, "max_abs": 0.00019201122972262175}}, "out_rel_frob": 0.00027736318009496345, "lse_shape": [1, 8, 512, 1], "lse_max_abs": 8.773831510211494e-07, "lse_base": "e", "empty_row_lse": "-inf", "empty_row_out": "zeros", "empty_row_dq": "zeros", "empty_row_probe": "attn_bias whose row 0 is all -inf, Lq = Lk = 128"}]"#;
        let r = parse_sdpa(text).unwrap();
        assert_eq!(r.len(), 1);
        let row = &r[0];
        assert_eq!(row.pass, Pass::Backward);
        assert_eq!(row.problem, Problem::seed());
        assert_eq!(row.name(), "sdpa-cudnn-backward");
        let grads = row.grads.as_ref().unwrap();
        assert_eq!(grads.dk.rel_frob, Some(0.0002946207072710536));
        assert_eq!(grads.dv.max_abs, Some(0.00019201122972262175));
        assert_eq!(row.rel_frob, grads.dq.rel_frob);
        // written back, it keeps its pass and errors
        let again: SdpaResult = serde_json::from_str(&serde_json::to_string(row).unwrap()).unwrap();
        assert_eq!(&again, row);
        let expanded = SdpaResult {
            variant: Some("expanded-kv".into()),
            ..row.clone()
        };
        assert_eq!(expanded.name(), "sdpa-cudnn-backward+expanded-kv");
    }
}
