//! The op on a GPU, beyond what the binary's one call shows: tensors that start inside
//! their buffers, one export shared by two ops, errors raised from `cuda_fwd` itself.
//! Needs a CUDA device and an export:
//! `EVO_EXPORT_DIR=out/h100 cargo test --release --features gpu --test gpu`.

use candle_core::{DType, Device, Tensor};
use evo_candle_attention::{reference, EvoAttention};
use evo_genome::Dtype;
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
    let d96 = randn(&device, (1, 8, 256, 96), DType::F16);
    let e = op.forward(&d96, &d96, &d96).unwrap_err().to_string();
    assert!(e.contains("D=96 has no champion"), "{e}");
}
