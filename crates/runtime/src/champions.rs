//! An export's champions on this machine's GPUs: one call of [`Champions::forward`]
//! checks the caller's arguments, picks the champion by the dispatch table's rule, loads
//! its kernel on the GPU that holds the tensors (once; kept), and launches it on the
//! caller's stream. [`Champions::forward_with_lse`] also writes the row's log-sum-exp,
//! and [`Champions::backward`] runs the export's backward kernel of the head dim and
//! dtype (the table's `[[backward]]` entries) on what those two wrote.
//!
//! The workspace is the runtime's, one per stream, for the split-KV forward and the
//! backward alike: calls on one stream are ordered, so they can share it, while two
//! streams could run at once and cannot. It only grows, and growing waits for the
//! stream first, which a stream being captured into a graph cannot do: a capture must
//! follow one call of its largest shape (the warm-up PyTorch's graph capture asks for
//! anyway).

use crate::backward::{bwd_workspace_len, BackwardModule, BwdBuffers};
use crate::device::{driver_present, open_context, pointer_info};
use crate::error::{driver, RuntimeError};
use crate::export::{Export, KernelEntry};
use crate::launch::Buffers;
use crate::module::AttentionModule;
use cudarc::driver::sys as cu;
use cudarc::driver::{CudaContext, CudaStream};
use evo_genome::{Dtype, Problem};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The export and what is loaded from it, per GPU.
pub struct Champions {
    export: Export,
    devices: Mutex<HashMap<usize, DeviceState>>,
}

/// One GPU's context, the stream modules are read through, and its loaded kernels.
struct DeviceState {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    compute_capability: (i32, i32),
    /// Keyed by class, dtype and build (true: the lse twin).
    modules: HashMap<(String, Dtype, bool), Arc<AttentionModule>>,
    /// Keyed by head dim and dtype.
    backward: HashMap<(u32, Dtype), Arc<BackwardModule>>,
    /// Keyed by the caller's stream handle.
    workspaces: HashMap<usize, Workspace>,
}

/// A device allocation of `floats` f32 for one stream's split-KV and backward calls.
struct Workspace {
    ctx: Arc<CudaContext>,
    ptr: cu::CUdeviceptr,
    floats: usize,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `malloc_sync` in this context and is freed once;
            // the stream that used it was synchronised before it was given up (`ensure`)
            // or the runtime is going away with its calls finished.
            let _ = unsafe { cudarc::driver::result::free_sync(self.ptr) };
        }
    }
}

impl Champions {
    /// Reads the export folder; touches no GPU (that happens on the first call).
    pub fn open(dir: &Path) -> Result<Champions, RuntimeError> {
        Ok(Champions {
            export: Export::open(dir)?,
            devices: Mutex::new(HashMap::new()),
        })
    }

    pub fn export(&self) -> &Export {
        &self.export
    }

    /// `O = softmax(Q Kᵀ / sqrt(D) + mask) V` on `b` (contiguous `[B, H, L, D]` tensors
    /// of `p.dtype` in device memory), enqueued on `stream` (null: the legacy default
    /// stream). Returns once the launches are enqueued.
    ///
    /// # Safety
    /// `stream` is null or a live stream of the context of the GPU that holds the
    /// tensors, and no other work writes Q, K, V or O while the call runs. The pointers
    /// themselves are checked: null, host, unknown or too-small buffers and another
    /// GPU's memory are errors.
    pub unsafe fn forward(
        &self,
        p: &Problem,
        b: &Buffers,
        stream: cu::CUstream,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller's.
        unsafe { self.forward_with_lse(p, b, None, stream) }
    }

    /// [`Self::forward`], also writing the forward's log-sum-exp (fp32 natural log,
    /// `[B, H, Lq]`, +inf for a row that sees no key) to the device buffer `lse` when
    /// it is some: what [`Self::backward`] takes. Such a call runs the champion's lse
    /// twin (kernels/ABI.md, "The log-sum-exp output"), so the plain calls keep the
    /// plain kernel's speed; an export without twins is [`RuntimeError::Unsupported`]
    /// then.
    ///
    /// # Safety
    /// As [`Self::forward`]; nothing else writes `lse` during the call.
    pub unsafe fn forward_with_lse(
        &self,
        p: &Problem,
        b: &Buffers,
        lse: Option<u64>,
        stream: cu::CUstream,
    ) -> Result<(), RuntimeError> {
        p.validate().map_err(RuntimeError::InvalidArgument)?;
        let (entry, kernel) = match lse {
            Some(_) => self.export.choose_lse(p)?,
            None => self.export.choose(p)?,
        };
        let (q_bytes, kv_bytes) = (p.q_elems() as u64 * 2, p.kv_elems() as u64 * 2);
        let mut tensors = vec![
            ("q", b.q, q_bytes),
            ("k", b.k, kv_bytes),
            ("v", b.v, kv_bytes),
            ("o", b.o, q_bytes),
        ];
        if let Some(lse) = lse {
            tensors.push(("lse", lse, lse_bytes(p)));
        }
        self.on_device(&tensors, stream, |state| {
            let key = (entry.class.clone(), p.dtype, lse.is_some());
            let module = match state.modules.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let image = self.export.image(kernel, state.compute_capability)?;
                    let twin = if lse.is_some() { ", lse twin" } else { "" };
                    let name = format!("champion {} ({}{twin})", entry.class, p.dtype);
                    let m = Arc::new(AttentionModule::load(
                        &state.ctx,
                        &state.stream,
                        &name,
                        &image,
                    )?);
                    state.modules.insert(key, m.clone());
                    m
                }
            };
            let mut buffers = *b;
            if let Some((o_len, lse_len)) = module.workspace_len(p) {
                let ws = state.workspace(stream, o_len + lse_len)?;
                buffers.ws_o = ws;
                buffers.ws_lse = ws + (o_len * 4) as u64;
            }
            // SAFETY: the buffers (and lse) were checked to be device memory of this
            // GPU, large enough for `p`; the workspace is sized by the module for `p`;
            // the stream is the caller's (null or of this context, checked), and the
            // context is current.
            unsafe { module.forward_with_lse(stream, p, &buffers, lse) }
        })
    }

    /// dQ, dK and dV of `O = attention(Q, K, V)` for the upstream gradient dO, from the
    /// forward's O and log-sum-exp ([`Self::forward_with_lse`] on the same problem),
    /// with the export's backward kernel for the head dim and dtype, enqueued on
    /// `stream`. dK and dV are `[B, Hkv, Lk, D]`: a K/V head's gradient sums its group's
    /// query heads. `b.ws` is ignored: the workspace is the runtime's. An export without
    /// a backward for the head dim and dtype is [`RuntimeError::Unsupported`].
    ///
    /// # Safety
    /// As [`Self::forward`], for the nine tensors; nothing else writes dQ, dK or dV
    /// during the call.
    pub unsafe fn backward(
        &self,
        p: &Problem,
        b: &BwdBuffers,
        stream: cu::CUstream,
    ) -> Result<(), RuntimeError> {
        p.validate().map_err(RuntimeError::InvalidArgument)?;
        let (entry, kernel) = self.export.choose_backward(p)?;
        let (q_bytes, kv_bytes) = (p.q_elems() as u64 * 2, p.kv_elems() as u64 * 2);
        let tensors = [
            ("q", b.q, q_bytes),
            ("k", b.k, kv_bytes),
            ("v", b.v, kv_bytes),
            ("o", b.o, q_bytes),
            ("do", b.d_o, q_bytes),
            ("lse", b.lse, lse_bytes(p)),
            ("dq", b.dq, q_bytes),
            ("dk", b.dk, kv_bytes),
            ("dv", b.dv, kv_bytes),
        ];
        self.on_device(&tensors, stream, |state| {
            let module = state.backward_module(entry.head_dim, p.dtype, kernel, &self.export)?;
            let buffers = BwdBuffers {
                ws: state.workspace(stream, bwd_workspace_len(p))?,
                ..*b
            };
            // SAFETY: the nine tensors were checked to be device memory of this GPU,
            // large enough for `p`; the workspace holds `bwd_workspace_len(p)` floats;
            // the stream is the caller's (null or of this context, checked), and the
            // context is current.
            unsafe { module.backward(stream, p, &buffers) }
        })
    }

    /// Checks `tensors` (name, pointer, bytes needed) are device memory of one GPU,
    /// opens that GPU's state (once), makes its context current, checks the stream
    /// belongs to it and runs `body` on it.
    fn on_device<R>(
        &self,
        tensors: &[(&str, u64, u64)],
        stream: cu::CUstream,
        body: impl FnOnce(&mut DeviceState) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        if !driver_present() {
            return Err(open_context(0)
                .err()
                .unwrap_or_else(|| RuntimeError::NoDevice("libcuda was not found".into())));
        }
        cudarc::driver::result::init().map_err(driver("initialising the driver"))?;
        let ordinal = check_buffers(tensors)?;
        let mut devices = self
            .devices
            .lock()
            .map_err(|_| RuntimeError::Abi("a call panicked while holding the runtime".into()))?;
        let state = match devices.entry(ordinal) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(DeviceState::open(ordinal)?),
        };
        state
            .ctx
            .bind_to_thread()
            .map_err(driver("making the GPU's context current"))?;
        state.check_stream(stream, ordinal)?;
        body(state)
    }
}

/// Bytes of the fp32 `[B, H, Lq]` log-sum-exp.
fn lse_bytes(p: &Problem) -> u64 {
    (p.batch * p.heads) as u64 * p.q_len as u64 * 4
}

/// Checks each tensor (name, pointer, bytes needed) is device memory of one GPU, large
/// enough; returns that GPU.
fn check_buffers(tensors: &[(&str, u64, u64)]) -> Result<usize, RuntimeError> {
    let mut ordinal = None;
    for &(what, ptr, bytes) in tensors {
        let info = pointer_info(ptr, what)?;
        if let Some(after) = info.bytes_after {
            if after < bytes {
                return Err(RuntimeError::InvalidArgument(format!(
                    "{what} has {after} bytes from its pointer to the end of its allocation, \
                     but the call needs {bytes} (contiguous [B, H, L, D] of 16-bit elements; \
                     lse: [B, H, Lq] floats)"
                )));
            }
        }
        match ordinal {
            None => ordinal = Some(info.ordinal),
            Some(o) if o != info.ordinal => {
                return Err(RuntimeError::InvalidArgument(format!(
                    "q is on GPU {o} but {what} on GPU {}; put all the tensors on one GPU",
                    info.ordinal
                )))
            }
            Some(_) => {}
        }
    }
    ordinal.ok_or_else(|| RuntimeError::InvalidArgument("no tensor given".into()))
}

impl DeviceState {
    fn open(ordinal: usize) -> Result<DeviceState, RuntimeError> {
        let ctx = open_context(ordinal)?;
        let stream = ctx
            .new_stream()
            .map_err(driver("creating the runtime's stream"))?;
        let compute_capability = ctx
            .compute_capability()
            .map_err(driver("reading the compute capability"))?;
        Ok(DeviceState {
            ctx,
            stream,
            compute_capability,
            modules: HashMap::new(),
            backward: HashMap::new(),
            workspaces: HashMap::new(),
        })
    }

    /// The backward module of a head dim and dtype, loaded from `kernel` once.
    fn backward_module(
        &mut self,
        head_dim: u32,
        dtype: Dtype,
        kernel: &KernelEntry,
        export: &Export,
    ) -> Result<Arc<BackwardModule>, RuntimeError> {
        if let Some(m) = self.backward.get(&(head_dim, dtype)) {
            return Ok(m.clone());
        }
        let image = export.image(kernel, self.compute_capability)?;
        let name = format!("backward D{head_dim} ({dtype})");
        let m = Arc::new(BackwardModule::load(
            &self.ctx,
            &self.stream,
            &name,
            &image,
        )?);
        self.backward.insert((head_dim, dtype), m.clone());
        Ok(m)
    }

    /// A non-null stream must belong to this GPU's context.
    fn check_stream(&self, stream: cu::CUstream, ordinal: usize) -> Result<(), RuntimeError> {
        if stream.is_null() {
            return Ok(());
        }
        let mut ctx: cu::CUcontext = std::ptr::null_mut();
        // SAFETY: `stream` is the caller's live stream (the function's contract); the
        // driver writes one context handle.
        unsafe { cu::cuStreamGetCtx(stream, &mut ctx) }
            .result()
            .map_err(driver("asking the driver for the stream's context"))?;
        if ctx != self.ctx.cu_ctx() {
            return Err(RuntimeError::InvalidArgument(format!(
                "the stream is not a stream of GPU {ordinal}'s primary context, where the \
                 tensors are; launch on a stream of that GPU"
            )));
        }
        Ok(())
    }

    /// The workspace of `stream`, grown to at least `floats` f32.
    fn workspace(&mut self, stream: cu::CUstream, floats: usize) -> Result<u64, RuntimeError> {
        let key = stream as usize;
        if let Some(ws) = self.workspaces.get(&key) {
            if ws.floats >= floats {
                return Ok(ws.ptr);
            }
        }
        let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: `stream` is null or the caller's live stream; one status is written.
        unsafe { cu::cuStreamIsCapturing(stream, &mut status) }
            .result()
            .map_err(driver("asking whether the stream is being captured"))?;
        if status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Err(RuntimeError::InvalidArgument(
                "this call needs a larger workspace (split-KV or backward), which cannot be allocated \
                 while the stream is captured into a graph; make one call of the largest \
                 shape before the capture"
                    .into(),
            ));
        }
        if self.workspaces.contains_key(&key) {
            // SAFETY: `stream` is null or the caller's live stream.
            unsafe { cudarc::driver::result::stream::synchronize(stream) }.map_err(driver(
                "waiting for the stream before growing its workspace",
            ))?;
            self.workspaces.remove(&key);
        }
        // SAFETY: the context is current (`forward` bound it); the allocation is freed
        // once, by `Workspace::drop`.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(floats * 4) }
            .map_err(driver(format!("allocating a workspace of {floats} floats")))?;
        self.workspaces.insert(
            key,
            Workspace {
                ctx: self.ctx.clone(),
                ptr,
                floats,
            },
        );
        Ok(ptr)
    }
}
