//! The backward through the export on a GPU (opt-in: `cargo test --features gpu --test
//! integration gpu_backward`): `evo_attention.sdpa` under autograd, evo's forward with the
//! log-sum-exp and its backward kernel, against torch SDPA's gradients on the same
//! inputs, both measured against a float64 reference (scripts/backward_check.py: f16 and
//! bf16, causal or not, grouped heads, Lq != Lk, odd lengths, every head dim of the
//! recorded table's backward, D256 included; and the fallback to torch's gradient of a
//! copy of the export without D256's backward entry). Needs NVRTC and python3 with torch
//! on CUDA (else skipped, saying so).

use crate::util::{export_champions, repo_root, stderr, stdout};
use std::process::Command;

#[test]
fn gpu_backward_gradients_match_torch_sdpa() {
    let torch = Command::new("python3")
        .args(["-c", "import torch; assert torch.cuda.is_available()"])
        .output();
    if !torch.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: python3 cannot import torch with CUDA here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let o = export_champions(&out, &["--cubin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new("python3")
        .arg(repo_root().join("scripts/backward_check.py"))
        .arg(&out)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    println!("{}", stdout(&o));
    assert!(
        o.status.success() && stdout(&o).contains("backward check: passed"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}
