//! The op under candle's autograd. When q, k or v is tracked (a `Var`, or computed from
//! one), [`crate::EvoAttention::forward`] records the op in the role [`Role::Tracked`]:
//! its forward runs the champion's lse twin, which also writes each row's fp32
//! log-sum-exp, and keeps that buffer; its `bwd` runs the same op in the role
//! [`Role::Backward`], whose "forward" is the export's backward kernel for the head dim
//! (dQ, dK and dV from q, k, v, the forward's O and lse and the upstream gradient)
//! through [`Champions::backward`](evo_runtime::Champions::backward), on candle's
//! stream. The three gradients come back in one buffer and are views of it.
//!
//! Untracked calls are as before: the plain champion, no lse. An export without a
//! backward kernel for the head dim and dtype is a candle error from `backward()` that
//! says so, as is one whose champion has no lse twin (an export written before them).

use crate::EvoAttention;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, DevicePtr, DevicePtrMut, DeviceRepr,
};
use candle_core::cuda_backend::CudaDType;
use candle_core::{bail, CudaStorage, Error, Layout, Result, Storage, Tensor};
use evo_genome::{Dtype, Problem};
use evo_runtime::BwdBuffers;
use half::{bf16, f16};
use std::sync::{Arc, Mutex};

/// What a call of the op is for.
#[derive(Clone, Default)]
pub(crate) enum Role {
    /// O, untracked: the plain champion.
    #[default]
    Plain,
    /// O of a tracked call, keeping its log-sum-exp for the backward.
    Tracked(Arc<Mutex<Lse>>),
    /// dQ, dK and dV of a tracked call, as one flat buffer: dQ's elements, then dK's,
    /// then dV's.
    Backward(Arc<BackwardOf>),
}

/// What a tracked forward left for its backward.
pub(crate) enum Lse {
    /// The forward has not run.
    NotYet,
    /// The fp32 `[B, H, Lq]` log-sum-exp the champion's lse twin wrote.
    Kept(CudaSlice<f32>),
    /// The forward ran without it, and why.
    Missing(String),
}

/// The tensors of one tracked call that its backward reads besides q, k and v.
pub(crate) struct BackwardOf {
    o: Tensor,
    d_o: Tensor,
    lse: Arc<Mutex<Lse>>,
}

fn poisoned() -> Error {
    Error::msg("evo attention: a call panicked while holding the forward's log-sum-exp")
}

/// The tracked forward: O, and the log-sum-exp kept in `kept` (or why not).
pub(crate) fn tracked_forward(
    op: &EvoAttention,
    p: &Problem,
    q: (&CudaStorage, &Layout),
    k: (&CudaStorage, &Layout),
    v: (&CudaStorage, &Layout),
    kept: &Mutex<Lse>,
) -> Result<CudaStorage> {
    let device = q.0.device().clone();
    let stream = device.cuda_stream();
    let run = |lse: Option<u64>| match p.dtype {
        Dtype::F16 => op.cuda_fwd_typed::<f16>(p, q, k, v, lse),
        Dtype::Bf16 => op.cuda_fwd_typed::<bf16>(p, q, k, v, lse),
    };
    // An export whose champion has no lse twin still runs the forward; only the
    // gradient is refused, by the backward, with the runtime's reason.
    let (o, lse) = match op.champions.export().choose_lse(p) {
        Ok(_) => {
            let rows = (p.batch * p.heads) as usize * p.q_len as usize;
            // SAFETY: the lse twin writes every row of lse (+inf where a row sees no
            // key); if the call fails the buffer is dropped unread.
            let mut lse = unsafe { device.alloc::<f32>(rows) }?;
            let o = {
                let (lse_ptr, _guard) = lse.device_ptr_mut(&stream);
                run(Some(lse_ptr))?
            };
            (o, Lse::Kept(lse))
        }
        Err(why) => (run(None)?, Lse::Missing(why.to_string())),
    };
    *kept.lock().map_err(|_| poisoned())? = lse;
    Ok(o)
}

/// candle's `bwd` of a tracked call: the op again in the backward role, its one buffer
/// cut into dQ, dK and dV.
pub(crate) fn gradients(
    op: &EvoAttention,
    lse: &Arc<Mutex<Lse>>,
    [q, k, v]: [&Tensor; 3],
    o: &Tensor,
    grad_o: &Tensor,
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    if grad_o.dtype() != o.dtype() {
        bail!(
            "evo attention: the gradient of O is {:?} but O is {:?}",
            grad_o.dtype(),
            o.dtype()
        )
    }
    let backward = EvoAttention {
        role: Role::Backward(Arc::new(BackwardOf {
            o: o.clone(),
            d_o: grad_o.contiguous()?,
            lse: lse.clone(),
        })),
        ..op.clone()
    };
    let all = q.apply_op3_no_bwd(k, v, &backward)?;
    let (nq, nkv) = (q.elem_count(), k.elem_count());
    let dq = all.narrow(0, 0, nq)?.reshape(q.shape())?;
    let dk = all.narrow(0, nq, nkv)?.reshape(k.shape())?;
    let dv = all.narrow(0, nq + nkv, nkv)?.reshape(v.shape())?;
    Ok((Some(dq), Some(dk), Some(dv)))
}

/// A tensor's elements from its first on (a contiguous tensor may start inside its
/// buffer, as a `narrow` of the batch does).
pub(crate) fn view<'a, T: CudaDType + DeviceRepr>(
    s: &'a CudaStorage,
    l: &Layout,
) -> Result<CudaView<'a, T>> {
    Ok(s.as_cuda_slice::<T>()?.slice(l.start_offset()..))
}

/// The backward role's work: dQ, dK and dV of `p` into one new buffer.
pub(crate) fn backward_typed<T: CudaDType + DeviceRepr>(
    op: &EvoAttention,
    of: &BackwardOf,
    p: &Problem,
    q: (&CudaStorage, &Layout),
    k: (&CudaStorage, &Layout),
    v: (&CudaStorage, &Layout),
) -> Result<CudaStorage> {
    let BackwardOf { o, d_o, lse: kept } = of;
    let device = q.0.device();
    let stream = device.cuda_stream();
    let lse = kept.lock().map_err(|_| poisoned())?;
    let lse = match &*lse {
        Lse::Kept(lse) => lse,
        Lse::Missing(why) => bail!(
            "evo attention on {}: no gradient, the forward ran without its log-sum-exp \
             ({why}); export the champions again with this evo (`evo export`)",
            p.spec()
        ),
        Lse::NotYet => bail!("evo attention: backward before its forward ran"),
    };
    let (o_storage, o_l) = o.storage_and_layout();
    let (do_storage, do_l) = d_o.storage_and_layout();
    let (Storage::Cuda(o_st), Storage::Cuda(do_st)) = (&*o_storage, &*do_storage) else {
        bail!("evo attention: O and its gradient must be on the CUDA device of q, k and v")
    };
    if o_l.shape() != q.1.shape() || do_l.shape() != q.1.shape() || !o_l.is_contiguous() {
        bail!(
            "evo attention: O is {:?} and its gradient {:?}, q is {:?}; all three must \
             be contiguous [B, H, Lq, D]",
            o_l.shape().dims(),
            do_l.shape().dims(),
            q.1.shape().dims()
        )
    }
    let (q_view, k_view, v_view) = (
        view::<T>(q.0, q.1)?,
        view::<T>(k.0, k.1)?,
        view::<T>(v.0, v.1)?,
    );
    let (o_view, do_view) = (view::<T>(o_st, o_l)?, view::<T>(do_st, do_l)?);
    let (nq, nkv) = (p.q_elems(), p.kv_elems());
    // SAFETY: the backward kernels write every element of dQ, dK and dV (zeros
    // where no query sees a key, kernels/ABI.md); a failed call drops it unread.
    let mut all = unsafe { device.alloc::<T>(nq + 2 * nkv) }?;
    {
        let (q_ptr, _q) = q_view.device_ptr(&stream);
        let (k_ptr, _k) = k_view.device_ptr(&stream);
        let (v_ptr, _v) = v_view.device_ptr(&stream);
        let (o_ptr, _o) = o_view.device_ptr(&stream);
        let (do_ptr, _do) = do_view.device_ptr(&stream);
        let (lse_ptr, _lse) = lse.device_ptr(&stream);
        let (all_ptr, _all) = all.device_ptr_mut(&stream);
        let elem = std::mem::size_of::<T>() as u64;
        let buffers = BwdBuffers {
            q: q_ptr,
            k: k_ptr,
            v: v_ptr,
            o: o_ptr,
            d_o: do_ptr,
            lse: lse_ptr,
            dq: all_ptr,
            dk: all_ptr + nq as u64 * elem,
            dv: all_ptr + (nq + nkv) as u64 * elem,
            ws: 0,
        };
        let raw_stream = stream.cu_stream() as *mut std::ffi::c_void;
        // SAFETY: as the forward's call (lib.rs): candle's live stream of the device
        // holding the nine buffers; the inputs are only read, `all` is ours until
        // returned; the runtime checks each address and size and brings its own
        // workspace.
        unsafe { op.champions.backward(p, &buffers, raw_stream.cast()) }
            .map_err(|e| Error::msg(format!("evo attention's backward on {}: {e}", p.spec())))?;
    }
    Ok(CudaStorage::wrap_cuda_slice(all, device.clone()))
}
