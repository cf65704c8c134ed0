//! An evo export's champions as a candle op: `o = attention(q, k, v)` on candle CUDA
//! tensors, run by evo's runtime on candle's own stream.
//!
//! [`EvoAttention`] is a [`CustomOp3`]: candle hands its `cuda_fwd` the three storages
//! and layouts, the op checks what the kernels' ABI needs (f16 or bf16, contiguous
//! `[B, H, L, D]`), allocates the output on candle's device and calls
//! [`Champions::forward`], which picks the champion by the export's dispatch table and
//! enqueues it. Only raw device addresses and the raw stream handle cross from candle to
//! the runtime: the two are separate libraries that happen to share a cudarc today, and
//! nothing here should break when they stop sharing one.
//!
//! Everything that cannot run is a candle error saying why, never a panic: a CPU tensor,
//! another dtype, a strided view, mismatched shapes, a head dim or dtype the export has
//! no champion for, a kernel built for another GPU.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{DevicePtr, DevicePtrMut, DeviceRepr};
use candle_core::cuda_backend::CudaDType;
use candle_core::{
    bail, CpuStorage, CudaStorage, CustomOp3, DType, Error, Layout, Result, Shape, Tensor,
};
use evo_genome::{Dtype, HeadDim, Problem};
use evo_runtime::{Buffers, Champions};
use half::{bf16, f16};
use std::path::Path;
use std::sync::Arc;

mod grad;
pub mod reference;

/// `softmax(q kᵀ / sqrt(D) + mask) v` by an export's champions; `causal` masks key `j`
/// from query `i` when `j > i` (top-left aligned, as PyTorch's `is_causal`).
#[derive(Clone)]
pub struct EvoAttention {
    pub(crate) champions: Arc<Champions>,
    pub(crate) causal: bool,
    /// Plain for every op a caller makes; `forward` makes the tracked one, and its
    /// backward the backward one (src/grad.rs).
    pub(crate) role: grad::Role,
}

impl EvoAttention {
    /// Reads the export folder `evo export` wrote; touches no GPU.
    pub fn open(export_dir: &Path, causal: bool) -> Result<EvoAttention> {
        let champions = Champions::open(export_dir).map_err(Error::wrap)?;
        Ok(EvoAttention::new(Arc::new(champions), causal))
    }

    /// One loaded export can serve several ops (causal and not): the runtime keeps the
    /// kernels it loaded, per GPU, for all of them.
    pub fn new(champions: Arc<Champions>, causal: bool) -> EvoAttention {
        EvoAttention {
            champions,
            causal,
            role: grad::Role::Plain,
        }
    }

    pub fn champions(&self) -> &Champions {
        &self.champions
    }

    /// The attention problem these tensors pose, as the op will hand it to the runtime,
    /// or why the op cannot take them.
    pub fn problem(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Problem> {
        problem_of(
            [
                (q.dtype(), q.layout()),
                (k.dtype(), k.layout()),
                (v.dtype(), v.layout()),
            ],
            self.causal,
        )
    }

    /// Runs the op: `q` is `[B, H, Lq, D]`, `k` and `v` are `[B, H, Lk, D]`; the output
    /// has `q`'s shape and dtype. When candle tracks any of the three (a `Var`, or a
    /// tensor computed from one), the call is differentiable: it runs the champion's
    /// lse twin and keeps the log-sum-exp, and `backward()` computes dQ, dK and dV with
    /// the export's backward kernel (src/grad.rs). Otherwise it runs the plain champion.
    pub fn forward(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        if q.track_op() || k.track_op() || v.track_op() {
            let lse = Arc::new(std::sync::Mutex::new(grad::Lse::NotYet));
            let tracked = EvoAttention {
                role: grad::Role::Tracked(lse),
                ..self.clone()
            };
            q.apply_op3(k, v, tracked)
        } else {
            q.apply_op3_no_bwd(k, v, self)
        }
    }

    /// O of `p` into a new buffer on candle's stream, and each row's log-sum-exp into
    /// `lse` (fp32 `[B, H, Lq]`, device memory) when it is some.
    pub(crate) fn cuda_fwd_typed<T: CudaDType + DeviceRepr>(
        &self,
        p: &Problem,
        q: (&CudaStorage, &Layout),
        k: (&CudaStorage, &Layout),
        v: (&CudaStorage, &Layout),
        lse: Option<u64>,
    ) -> Result<CudaStorage> {
        // candle has checked that the three are on one device before calling the op.
        let device = q.0.device();
        let stream = device.cuda_stream();
        // A contiguous tensor may still start inside its buffer (a `narrow` of the batch):
        // the kernels take the address of its first element.
        let q_view = grad::view::<T>(q.0, q.1)?;
        let k_view = grad::view::<T>(k.0, k.1)?;
        let v_view = grad::view::<T>(v.0, v.1)?;
        // SAFETY: the champion writes every element of O (kernels/ABI.md), and if the
        // call fails the buffer is dropped unread, so its first contents never show.
        let mut o = unsafe { device.alloc::<T>(q.1.shape().elem_count()) }?;
        {
            // The guards make candle's later work on these buffers wait for the launch
            // (cudarc's event tracking), so they live until it is enqueued.
            let (q_ptr, _q_guard) = q_view.device_ptr(&stream);
            let (k_ptr, _k_guard) = k_view.device_ptr(&stream);
            let (v_ptr, _v_guard) = v_view.device_ptr(&stream);
            let (o_ptr, _o_guard) = o.device_ptr_mut(&stream);
            let buffers = Buffers {
                q: q_ptr,
                k: k_ptr,
                v: v_ptr,
                o: o_ptr,
                ..Buffers::default()
            };
            // The raw handle, not a cudarc type: null for candle's default device (the
            // legacy default stream), else the stream of `Device::new_cuda_with_stream`.
            let raw_stream = stream.cu_stream() as *mut std::ffi::c_void;
            // SAFETY: the stream is candle's live stream of the device that holds the four
            // buffers (the runtime checks it belongs to that GPU's primary context, which
            // is candle's); q, k and v are only read and o is ours until returned, so no
            // other work writes them during the call. The runtime checks each address
            // is device memory with room for `p`.
            // `lse`, when given, is the caller's buffer of B·H·Lq floats on this device.
            unsafe {
                self.champions
                    .forward_with_lse(p, &buffers, lse, raw_stream.cast())
            }
            .map_err(|e| Error::msg(format!("evo attention on {}: {e}", p.spec())))?;
        }
        Ok(CudaStorage::wrap_cuda_slice(o, device.clone()))
    }
}

impl CustomOp3 for EvoAttention {
    fn name(&self) -> &'static str {
        match self.role {
            grad::Role::Backward(_) => "evo-attention-backward",
            _ => "evo-attention",
        }
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        bail!(
            "evo attention runs an export's CUDA kernels only: put q, k and v on a CUDA \
             device (Device::new_cuda(0)), or use candle's own attention on the CPU"
        )
    }

    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        q_l: &Layout,
        k: &CudaStorage,
        k_l: &Layout,
        v: &CudaStorage,
        v_l: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let p = problem_of(
            [(q.dtype(), q_l), (k.dtype(), k_l), (v.dtype(), v_l)],
            self.causal,
        )?;
        let (q, k, v) = ((q, q_l), (k, k_l), (v, v_l));
        match (&self.role, p.dtype) {
            (grad::Role::Plain, Dtype::F16) => Ok((
                self.cuda_fwd_typed::<f16>(&p, q, k, v, None)?,
                q_l.shape().clone(),
            )),
            (grad::Role::Plain, Dtype::Bf16) => Ok((
                self.cuda_fwd_typed::<bf16>(&p, q, k, v, None)?,
                q_l.shape().clone(),
            )),
            (grad::Role::Tracked(lse), _) => Ok((
                grad::tracked_forward(self, &p, q, k, v, lse)?,
                q_l.shape().clone(),
            )),
            (grad::Role::Backward(of), dtype) => {
                let all = match dtype {
                    Dtype::F16 => grad::backward_typed::<f16>(self, of, &p, q, k, v)?,
                    Dtype::Bf16 => grad::backward_typed::<bf16>(self, of, &p, q, k, v)?,
                };
                Ok((all, Shape::from(p.q_elems() + 2 * p.kv_elems())))
            }
        }
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
        grad_o: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        match &self.role {
            grad::Role::Tracked(lse) => grad::gradients(self, lse, [q, k, v], o, grad_o),
            _ => Err(Error::BackwardNotSupported { op: self.name() }),
        }
    }
}

/// The problem of q, k and v given by dtype and layout, or the first reason the kernels
/// cannot take them.
pub fn problem_of(qkv: [(DType, &Layout); 3], causal: bool) -> Result<Problem> {
    let [(dtype, q), (k_dtype, k), (v_dtype, v)] = qkv;
    for (name, other) in [("k", k_dtype), ("v", v_dtype)] {
        if other != dtype {
            bail!(
                "evo attention: q is {dtype:?} but {name} is {other:?}; q, k and v take one dtype"
            )
        }
    }
    let dtype = match dtype {
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::Bf16,
        other => bail!(
            "evo attention takes f16 or bf16 tensors, not {other:?}; convert them with \
             .to_dtype(DType::F16) or .to_dtype(DType::BF16)"
        ),
    };
    let mut dims = [[0usize; 4]; 3];
    for (i, (name, l)) in [("q", q), ("k", k), ("v", v)].into_iter().enumerate() {
        let Ok((b, h, len, d)) = l.shape().dims4() else {
            bail!(
                "evo attention: {name} has shape {:?}; it must be [B, H, L, D]",
                l.shape().dims()
            )
        };
        if !l.is_contiguous() {
            bail!(
                "evo attention: {name} is not contiguous (shape {:?}, strides {:?}); the \
                 kernels read row-major [B, H, L, D], so call .contiguous() first \
                 (a [B, L, H, D] tensor transposed to [B, H, L, D] is such a view)",
                l.shape().dims(),
                l.stride()
            )
        }
        dims[i] = [b, h, len, d];
    }
    let [[b, h, lq, d], kd, vd] = dims;
    if kd != vd {
        bail!("evo attention: k is {kd:?} but v is {vd:?}; they must have one shape [B, H, Lk, D]")
    }
    if (kd[0], kd[1], kd[3]) != (b, h, d) {
        bail!(
            "evo attention: q is {:?} but k is {kd:?}; B, H and D must agree (k and v \
             may differ from q only in their length)",
            [b, h, lq, d]
        )
    }
    let dim = |what: &str, n: usize| -> Result<u32> {
        match u32::try_from(n) {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!(
                "evo attention: {what} is {n}; the kernels take 1 to {}",
                u32::MAX
            ),
        }
    };
    let head_dim = HeadDim::try_from(dim("D", d)?).map_err(|e| {
        let built: Vec<String> = HeadDim::ALL.iter().map(|h| h.get().to_string()).collect();
        Error::msg(format!(
            "evo attention: head dim D={d} has no champion: evo builds kernels for D={} ({e})",
            built.join(", ")
        ))
    })?;
    Ok(Problem {
        batch: dim("B", b)?,
        heads: dim("H", h)?,
        q_len: dim("Lq", lq)?,
        kv_len: dim("Lk", kd[2])?,
        head_dim,
        dtype,
        causal,
        // Fields evo adds later keep their defaults (the seed's), which the runtime's
        // dispatch treats as "as before".
        ..Problem::seed()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn layout(dims: &[usize]) -> Layout {
        Layout::contiguous(dims)
    }

    /// The problem of q, k and v of one dtype.
    fn problem(dtype: DType, q: &Layout, k: &Layout, v: &Layout) -> Result<Problem> {
        problem_of([(dtype, q), (dtype, k), (dtype, v)], false)
    }

    #[test]
    fn a_well_formed_call_becomes_the_runtimes_problem() {
        let (q, kv) = (layout(&[2, 16, 77, 128]), layout(&[2, 16, 1000, 128]));
        let p = problem_of(
            [(DType::BF16, &q), (DType::BF16, &kv), (DType::BF16, &kv)],
            true,
        );
        assert_eq!(p.unwrap().spec(), "2,16,77,1000,128,bf16,causal");
    }

    #[test]
    fn what_the_kernels_cannot_take_is_an_error_that_says_why() {
        let l = layout(&[1, 8, 512, 64]);
        let e = problem(DType::F32, &l, &l, &l).unwrap_err();
        assert!(e.to_string().contains("f16 or bf16"), "{e}");
        let e = problem_of(
            [(DType::F16, &l), (DType::BF16, &l), (DType::F16, &l)],
            false,
        );
        let e = e.unwrap_err();
        assert!(e.to_string().contains("k is BF16"), "{e}");
        // Every head dim evo builds is the runtime's to take or refuse (the export may
        // have no class for it); one evo never builds is refused here.
        for d in HeadDim::ALL {
            let l = layout(&[1, 8, 512, d.get() as usize]);
            assert!(problem(DType::F16, &l, &l, &l).is_ok(), "D{}", d.get());
        }
        let d80 = layout(&[1, 8, 512, 80]);
        let e = problem(DType::F16, &d80, &d80, &d80).unwrap_err();
        assert!(
            e.to_string()
                .contains("D=80 has no champion: evo builds kernels for D=64, 96, 128, 256"),
            "{e}"
        );
        let blhd = layout(&[1, 512, 8, 64]).transpose(1, 2).unwrap();
        let e = problem(DType::F16, &blhd, &l, &l).unwrap_err();
        assert!(e.to_string().contains("q is not contiguous"), "{e}");
        let other_d = layout(&[1, 8, 512, 128]);
        let e = problem(DType::F16, &l, &other_d, &other_d).unwrap_err();
        assert!(e.to_string().contains("B, H and D must agree"), "{e}");
        let e = problem(DType::F16, &l, &l, &other_d).unwrap_err();
        assert!(e.to_string().contains("one shape"), "{e}");
        let e = problem(DType::F16, &layout(&[8, 512, 64]), &l, &l).unwrap_err();
        assert!(e.to_string().contains("[B, H, L, D]"), "{e}");
        let empty = layout(&[0, 8, 512, 64]);
        let e = problem(DType::F16, &empty, &empty, &empty).unwrap_err();
        assert!(e.to_string().contains("B is 0"), "{e}");
    }

    #[test]
    fn cpu_tensors_are_refused_with_the_fix() {
        // An export of one class with an empty kernel: the CPU path is refused before a
        // champion is chosen or loaded (a table without a class is itself refused).
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("manifest.json"),
            r#"{"format": 1, "evo_version": "0", "nvrtc_version": "13.0", "device": "none",
                "arch": "sm_90", "dispatch": "dispatch.toml", "champions": [
                {"class": "c", "shape": "1,8,512,512,64,f16", "batch": 1, "heads": 8,
                 "q_len": 512, "kv_len": 512, "head_dim": 64, "causal": false,
                 "genome": "c", "genome_id": "0", "family": "hopper", "median_us": null,
                 "cudnn_us": null, "measured_dtype": null, "bench": null,
                 "experiment": "x", "kernels": [{"dtype": "f16", "arch": "sm_90",
                 "ptx": "c.f16.ptx"}]}]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("c.f16.ptx"), "").unwrap();
        std::fs::write(
            dir.path().join("dispatch.toml"),
            "device = \"none\"\n[[class]]\nname = \"c\"\nshape = \"1,8,512,512,64,f16\"\n\
             champion = \"c.toml\"\nexperiment = \"x\"\n",
        )
        .unwrap();
        let op = EvoAttention::open(dir.path(), false).unwrap();
        let t = Tensor::zeros((1, 8, 16, 64), DType::F16, &Device::Cpu).unwrap();
        let e = op.forward(&t, &t, &t).unwrap_err();
        assert!(e.to_string().contains("CUDA kernels only"), "{e}");
        // Tracked by autograd (the differentiable op), the same refusal.
        let var = candle_core::Var::from_tensor(&t).unwrap();
        assert!(var.as_tensor().track_op());
        let e = op.forward(var.as_tensor(), &t, &t).unwrap_err();
        assert!(e.to_string().contains("CUDA kernels only"), "{e}");
    }

    #[test]
    fn a_folder_that_is_no_export_is_named_with_the_fix() {
        let e = EvoAttention::open(Path::new("/nonexistent/evo-export"), false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("evo export"), "{e}");
    }
}
