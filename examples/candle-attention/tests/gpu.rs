//! The op on a GPU, beyond what the binary's one call shows: tensors that start inside
//! their buffers, one export shared by two ops, errors raised from `cuda_fwd` itself.
//! Needs a CUDA device and an export:
//! `EVO_EXPORT_DIR=out/h100 cargo test --release --features gpu --test gpu`.

use candle_core::{DType, Device, Tensor};
use evo_candle_attention::{reference, EvoAttention};
use evo_genome::{Dtype, HeadDim};
use evo_runtime::Champions;
use std::path::PathBuf;
use std::sync::Arc;

fn champions() -> Arc<Champions> {
    let dir = std::env::var_os("EVO_EXPORT_DIR")
        .map(PathBuf::from)
        .expect("set EVO_EXPORT_DIR to a folder `evo export` wrote");
    Arc::new(Champions::open(&dir).unwrap())
}

fn randn(device: &Device, dims: (usize, usize, usize, usize), dtype: DType) -> Tensor {
    Tensor::randn(0f32, 1f32, dims, device)
        .and_then(|t| t.to_dtype(dtype))
        .unwrap()
}

#[test]
fn views_that_start_inside_their_buffers_and_two_ops_on_one_export() {
    let champions = champions();
    let tolerance = champions
        .export()
        .manifest()
        .tolerances
        .iter()
        .find(|t| t.dtype == Dtype::F16)
        .cloned()
        .expect("the manifest records GREEN's f16 tolerance");
    let device = Device::new_cuda_with_stream(0).unwrap();
    // One batch of larger tensors: each is contiguous but starts at another offset of
    // its buffer, so an op that passed the buffer's address would read the wrong batch.
    let q = randn(&device, (3, 8, 512, 64), DType::F16)
        .narrow(0, 1, 1)
        .unwrap();
    let k = randn(&device, (2, 8, 512, 64), DType::F16)
        .narrow(0, 1, 1)
        .unwrap();
    let v = randn(&device, (3, 8, 512, 64), DType::F16)
        .narrow(0, 2, 1)
        .unwrap();
    assert!(q.is_contiguous() && q.layout().start_offset() > 0);
    for causal in [false, true] {
        let op = EvoAttention::new(champions.clone(), causal);
        let o = op.forward(&q, &k, &v).unwrap();
        let expected = reference::attention(&q, &k, &v, causal).unwrap();
        let (max_abs, rel_frob) = reference::errors(&o, &expected).unwrap();
        assert!(
            max_abs <= tolerance.max_abs && rel_frob <= tolerance.rel_frob,
            "causal {causal}: max abs {max_abs:e}, relative Frobenius {rel_frob:e}"
        );
    }
}

#[test]
fn what_cuda_fwd_refuses_is_a_candle_error() {
    let op = EvoAttention::new(champions(), false);
    let device = Device::new_cuda(0).unwrap();
    let q = randn(&device, (1, 8, 256, 64), DType::F16);
    let k = randn(&device, (1, 8, 256, 64), DType::BF16);
    let e = op.forward(&q, &k, &k).unwrap_err().to_string();
    assert!(e.contains("one dtype"), "{e}");
    let q = randn(&device, (1, 256, 8, 64), DType::F16)
        .transpose(1, 2)
        .unwrap();
    let kv = randn(&device, (1, 8, 256, 64), DType::F16);
    let e = op.forward(&q, &kv, &kv).unwrap_err().to_string();
    assert!(e.contains("not contiguous"), "{e}");
    let d80 = randn(&device, (1, 8, 256, 80), DType::F16);
    let e = op.forward(&d80, &d80, &d80).unwrap_err().to_string();
    assert!(e.contains("D=80 has no champion"), "{e}");
}

/// Every head dim the export's table has a class for runs (D96 and D256 included, on
/// the recorded H100 champions) within GREEN's tolerance, causal and not; a head dim evo
/// builds but the table has no class for is the runtime's refusal, naming it.
#[test]
fn every_head_dim_of_the_export_runs_and_no_other() {
    let champions = champions();
    let manifest = champions.export().manifest();
    let tolerance = manifest
        .tolerances
        .iter()
        .find(|t| t.dtype == Dtype::F16)
        .cloned()
        .expect("the manifest records GREEN's f16 tolerance");
    let dims: std::collections::BTreeSet<u32> =
        manifest.champions.iter().map(|c| c.head_dim).collect();
    assert!(!dims.is_empty(), "the export has no champions");
    let device = Device::new_cuda(0).unwrap();
    for &d in &dims {
        let q = randn(&device, (1, 4, 256, d as usize), DType::F16);
        let k = randn(&device, (1, 4, 384, d as usize), DType::F16);
        let v = randn(&device, (1, 4, 384, d as usize), DType::F16);
        for causal in [false, true] {
            let op = EvoAttention::new(champions.clone(), causal);
            let o = op
                .forward(&q, &k, &v)
                .unwrap_or_else(|e| panic!("D{d} causal {causal}: {e}"));
            let expected = reference::attention(&q, &k, &v, causal).unwrap();
            let (max_abs, rel_frob) = reference::errors(&o, &expected).unwrap();
            eprintln!("D{d} causal {causal}: max abs {max_abs:e}, relative Frobenius {rel_frob:e}");
            assert!(
                max_abs <= tolerance.max_abs && rel_frob <= tolerance.rel_frob,
                "D{d} causal {causal}: max abs {max_abs:e}, relative Frobenius {rel_frob:e}"
            );
        }
    }
    let op = EvoAttention::new(champions.clone(), false);
    for d in HeadDim::ALL.map(|h| h.get()) {
        if dims.contains(&d) {
            continue;
        }
        let t = randn(&device, (1, 4, 128, d as usize), DType::F16);
        let e = op.forward(&t, &t, &t).unwrap_err().to_string();
        assert!(
            e.contains(&format!("no class has head dim {d}")),
            "D{d}: {e}"
        );
    }
}

/// GREEN's backward limits (crates/gates/src/backward/green.rs, `BackwardTolerance`):
/// relative Frobenius, and the largest error relative to the largest |reference|.
fn backward_limits(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F16 => (1.5e-3, 3e-3),
        _ => (1.2e-2, 2.5e-2),
    }
}

/// Under candle's autograd the op's dQ, dK and dV (the export's backward kernels) are
/// candle's own f32 attention's gradients within GREEN's backward limits, at every head
/// dim the export has a backward for, both dtypes, causal and not, with Lq ≠ Lk; the
/// same op on untracked tensors still runs (the plain champion).
#[test]
fn tracked_calls_have_the_gradients_of_candles_attention() {
    use candle_core::Var;
    let champions = champions();
    let dims: std::collections::BTreeSet<u32> = champions
        .export()
        .manifest()
        .backward
        .iter()
        .map(|b| b.head_dim)
        .collect();
    assert!(!dims.is_empty(), "the export has no backward kernels");
    let device = Device::new_cuda(0).unwrap();
    for &d in &dims {
        for dtype in [DType::F16, DType::BF16] {
            for causal in [false, true] {
                let what = format!("D{d} {dtype:?} causal {causal}");
                let (q, k, v) = (
                    randn(&device, (1, 4, 200, d as usize), dtype),
                    randn(&device, (1, 4, 333, d as usize), dtype),
                    randn(&device, (1, 4, 333, d as usize), dtype),
                );
                // The upstream gradient, as the op sees it (rounded to the dtype).
                let w = randn(&device, (1, 4, 200, d as usize), dtype);
                let (qv, kv, vv) = (
                    Var::from_tensor(&q).unwrap(),
                    Var::from_tensor(&k).unwrap(),
                    Var::from_tensor(&v).unwrap(),
                );
                let op = EvoAttention::new(champions.clone(), causal);
                let o = op
                    .forward(qv.as_tensor(), kv.as_tensor(), vv.as_tensor())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let loss = (o.to_dtype(DType::F32).unwrap() * w.to_dtype(DType::F32).unwrap())
                    .unwrap()
                    .sum_all()
                    .unwrap();
                let grads = loss.backward().unwrap_or_else(|e| panic!("{what}: {e}"));
                // The reference: the same values in f32, through candle's attention.
                let f32_var =
                    |t: &Tensor| Var::from_tensor(&t.to_dtype(DType::F32).unwrap()).unwrap();
                let (qf, kf, vf) = (f32_var(&q), f32_var(&k), f32_var(&v));
                let of =
                    reference::attention(qf.as_tensor(), kf.as_tensor(), vf.as_tensor(), causal)
                        .unwrap();
                let ref_grads = (of * w.to_dtype(DType::F32).unwrap())
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .backward()
                    .unwrap();
                let (rel_limit, max_limit) = backward_limits(dtype);
                for (name, got, want) in [
                    ("dQ", qv.as_tensor(), qf.as_tensor()),
                    ("dK", kv.as_tensor(), kf.as_tensor()),
                    ("dV", vv.as_tensor(), vf.as_tensor()),
                ] {
                    let got = grads
                        .get(got)
                        .unwrap_or_else(|| panic!("{what}: no {name}"));
                    let want = ref_grads.get(want).unwrap();
                    assert_eq!(got.dtype(), dtype, "{what}: {name}");
                    assert_eq!(got.dims(), want.dims(), "{what}: {name}");
                    let (max_abs, rel_frob) = reference::errors(got, want).unwrap();
                    let scale = want
                        .abs()
                        .unwrap()
                        .max_all()
                        .unwrap()
                        .to_scalar::<f32>()
                        .unwrap() as f64;
                    eprintln!("{what} {name}: max abs {max_abs:e} of {scale:e}, relative Frobenius {rel_frob:e}");
                    assert!(
                        rel_frob <= rel_limit && max_abs <= max_limit * scale,
                        "{what} {name}: max abs {max_abs:e} of {scale:e}, relative Frobenius {rel_frob:e}"
                    );
                }
                // Untracked, the same op runs the plain champion.
                op.forward(&q, &k, &v)
                    .unwrap_or_else(|e| panic!("{what} untracked: {e}"));
            }
        }
    }
}
