//! The CUDA boundary: the only module that talks to the driver and cuBLAS, and the
//! only one with `unsafe`.
//!
//! One [`Device`] holds the context and one non-default stream (graph capture is not
//! allowed on the legacy default stream). cudarc's per-buffer event tracking is
//! switched off at creation: everything runs on that one stream, so the tracking
//! would only add event records to every launch — and inside a graph capture.
//!
//! Without a driver or a GPU every constructor returns [`GateError::NoDevice`]
//! with the reason (cudarc would panic on a missing library, so presence is
//! checked first): callers need no `cfg`, as candle's dummy CUDA backend.
//!
//! What a module declares, how it is loaded and how one call is launched live in the
//! runtime crate (`evo_runtime`: the ABI as a library, which an export's users link
//! too); this module keeps what measures. Rooms: [`blas`] (the two products as cuBLAS
//! GEMMs, for the hybrid and the reference), [`rig`] (FAST's resident input slots, their
//! archive and guards), [`launch`] (graphs whose launches are re-pointed every repeat,
//! event timing), [`loaded`] (an ABI kernel as the gates run it), [`hybrid`] (the
//! cuBLAS baseline), [`verifier`] (the device's input generator, fp32 reference and
//! row-by-row comparison).

mod backward;
mod blas;
mod hybrid;
mod launch;
mod loaded;
mod rig;
mod verifier;

pub use backward::{
    timing_lse, BackwardOutput, BackwardTensors, BackwardTimes, LoadedBackward, TimedLaunch,
    O_STREAM,
};
pub use evo_runtime::abi::{ENTRY_COMBINE, ENTRY_FWD, GEOMETRY_SYMBOL, TENSOR_MAPS_SYMBOL};
pub use evo_runtime::{Geometry, TensorMapSpec};
pub use hybrid::HybridKernel;
pub use loaded::LoadedKernel;

use crate::error::GateError;
use crate::inputs::Inputs;
use cudarc::cublas::{sys as blas_sys, CudaBlas};
use cudarc::driver::{
    CudaContext, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError,
    ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;
use evo_genome::{Dtype, Problem, Target};
use evo_runtime::{AttentionModule, ModuleImage};
use rig::Slots;
use std::sync::Arc;
use verifier::{DrawJob, Verifier};

/// The hybrid baseline's softmax entry point.
pub const ENTRY_SOFTMAX: &str = "evo_softmax_rows";

/// `EVO_PERSISTENT_GRID=N` caps every persistent kernel's grid at N CTAs instead of the
/// SMs times its CTAs per SM: the ABI lets a persistent kernel be launched with any grid,
/// and a small one makes small problems (GREEN's, the sanitizers') loop over several
/// tiles per CTA, the path large problems take.
pub const PERSISTENT_GRID_ENV: &str = "EVO_PERSISTENT_GRID";

fn persistent_grid_override() -> Option<u32> {
    std::env::var(PERSISTENT_GRID_ENV)
        .ok()?
        .parse()
        .ok()
        .filter(|&n: &u32| n > 0)
}

fn driver(during: impl Into<String>) -> impl FnOnce(DriverError) -> GateError {
    let during = during.into();
    move |e| GateError::Driver {
        during,
        message: evo_runtime::driver_message(&e),
    }
}

/// One GPU: its context and stream.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    compute_capability: (i32, i32),
    spare: Spare,
    /// The input generator and fp32 reference every kernel on this device is checked
    /// with ([`Device::install_verifier`]); GREEN's large cases and FAST need it.
    verifier: std::sync::OnceLock<Arc<Verifier>>,
}

/// FAST's slots of the last kernel timed on a device, kept for the next one: every
/// input slot, every O and the archive of O (about 150 MB at the seed shape). A kernel
/// timed on the same problem and set count takes them instead of allocating its own.
/// Their contents need no reset: each timed repeat draws every input slot anew and
/// poisons every O before the launches. Only slots whose kernel passed FAST's
/// verification are kept ([`crate::kernel::AttentionKernel::timing_verified`]); a
/// confirmation asks for fresh ones ([`Device::drop_spare_buffers`]).
type Spare = Arc<std::sync::Mutex<Option<Slots>>>;

impl Device {
    /// Opens GPU `ordinal`, or says why there is none.
    pub fn open(ordinal: usize) -> Result<Device, GateError> {
        if !evo_runtime::driver_present() {
            return Err(GateError::NoDevice(
                "libcuda (the NVIDIA driver library) was not found by the dynamic loader; \
                 this machine has no NVIDIA driver — GREEN and FAST need a GPU (use \
                 `evo evolve` with a recorded landscape, or run on the GPU machine with \
                 LD_LIBRARY_PATH=/usr/local/cuda/lib64)"
                    .into(),
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            GateError::NoDevice(format!(
                "the driver is present but GPU {ordinal} cannot be opened: {e} \
                 (no GPU, or CUDA_VISIBLE_DEVICES hides it)"
            ))
        })?;
        // SAFETY: no buffer exists yet, and every buffer and launch of this device
        // goes to the one stream below, so no cross-stream synchronisation is needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver("creating the stream"))?;
        let name = ctx.name().map_err(driver("reading the device name"))?;
        let compute_capability = ctx
            .compute_capability()
            .map_err(driver("reading the compute capability"))?;
        Ok(Device {
            ctx,
            stream,
            name,
            compute_capability,
            spare: Spare::default(),
            verifier: std::sync::OnceLock::new(),
        })
    }

    /// True when the last timed kernel's buffers are kept for the next one.
    pub fn has_spare_buffers(&self) -> bool {
        self.spare.lock().is_ok_and(|spare| spare.is_some())
    }

    /// Frees the timing buffers kept from the last kernel, so the next kernel timed
    /// allocates and uploads its own (a confirmation re-times on fresh buffers).
    pub fn drop_spare_buffers(&self) {
        if let Ok(mut spare) = self.spare.lock() {
            *spare = None;
        }
    }

    /// The device name as the driver reports it (`NVIDIA H100 80GB HBM3`).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// The genome target matching this device, if the project knows it.
    pub fn target(&self) -> Option<Target> {
        Target::from_compute_capability(self.compute_capability.0, self.compute_capability.1)
    }

    fn load_module(&self, what: &str, cubin: &[u8]) -> Result<Arc<CudaModule>, GateError> {
        self.ctx
            .load_module(Ptx::from_binary(cubin.to_vec()))
            .map_err(driver(format!("loading the module of {what}")))
    }

    /// Loads an attention kernel (CUBIN following kernels/ABI.md) and reads its geometry
    /// (the runtime's loader, the one an export's users run).
    pub fn load_attention(&self, name: &str, cubin: &[u8]) -> Result<LoadedKernel, GateError> {
        let mut module = AttentionModule::load(
            &self.ctx,
            &self.stream,
            name,
            &ModuleImage::Cubin(cubin.to_vec()),
        )?;
        if let Some(ctas) = persistent_grid_override() {
            module.cap_persistent_grid(ctas);
        }
        Ok(LoadedKernel::new(
            module,
            self.ctx.clone(),
            self.stream.clone(),
            self.spare.clone(),
            self.verifier.get().cloned(),
        ))
    }

    /// Loads a backward module (kernels/ABI.md, "The backward ABI").
    pub fn load_backward(&self, name: &str, cubin: &[u8]) -> Result<LoadedBackward, GateError> {
        let module = evo_runtime::BackwardModule::load(
            &self.ctx,
            &self.stream,
            name,
            &ModuleImage::Cubin(cubin.to_vec()),
        )?;
        Ok(LoadedBackward::new(
            module,
            self.ctx.clone(),
            self.stream.clone(),
            self.verifier.get().cloned(),
        ))
    }

    /// Installs the device side of the gates (the input generator, the fp32 reference's
    /// softmax and the row comparison: `kernels/verify.cu` compiled for this device).
    /// GREEN's cases above [`crate::reference::FULL_REFERENCE_MACS`] and every FAST need
    /// it; kernels loaded before it is installed cannot be timed.
    pub fn install_verifier(&self, cubin: &[u8]) -> Result<(), GateError> {
        if self.verifier.get().is_some() {
            return Ok(());
        }
        let module = self.load_module("the gates' verifier (kernels/verify.cu)", cubin)?;
        let verifier = Verifier::new(self.stream.clone(), module)?;
        let _ = self.verifier.set(Arc::new(verifier));
        Ok(())
    }

    /// True once [`Device::install_verifier`] has run.
    pub fn has_verifier(&self) -> bool {
        self.verifier.get().is_some()
    }

    fn verifier(&self) -> Result<&Arc<Verifier>, GateError> {
        self.verifier.get().ok_or_else(|| {
            GateError::Reference("this device has no verifier (Device::install_verifier)".into())
        })
    }

    /// The inputs the device draws from `seed` (how FAST's timed launches get theirs);
    /// [`Inputs::random`] draws the same bits on the host.
    pub fn draw_inputs(&self, p: &Problem, seed: u64, q_gain: f32) -> Result<Inputs, GateError> {
        let verifier = self.verifier()?;
        let st = &self.stream;
        let q = alloc::<u16>(st, p.q_elems(), "drawn Q")?;
        let k = alloc::<u16>(st, p.kv_elems(), "drawn K")?;
        let v = alloc::<u16>(st, p.kv_elems(), "drawn V")?;
        let jobs = DrawJob::inputs16(p, seed, q_gain, [ptr(&q, st), ptr(&k, st), ptr(&v, st)]);
        verifier.draw(p.dtype, &jobs)?;
        let down = |b: &CudaSlice<u16>| st.clone_dtoh(b).map_err(driver("reading drawn inputs"));
        Ok(Inputs {
            problem: *p,
            seed,
            q_gain,
            q: down(&q)?[..p.q_elems()].to_vec(),
            k: down(&k)?[..p.kv_elems()].to_vec(),
            v: down(&v)?[..p.kv_elems()].to_vec(),
        })
    }

    /// The device's fp32 reference of `inputs` (drawn again on the device from their
    /// seed and gain), every row: B·H·Lq·D floats.
    pub fn reference_of(&self, inputs: &Inputs) -> Result<Vec<f32>, GateError> {
        let verifier = self.verifier()?;
        let p = &inputs.problem;
        verifier.reference(p, inputs.seed, inputs.q_gain, None)?;
        let rows: Vec<u32> = (0..p.batch * p.heads * p.q_len).collect();
        verifier.rows_of_reference(p, &rows)
    }

    /// The cuBLAS hybrid baseline (Q·Kᵀ GEMM, the row softmax, P·V GEMM); one
    /// softmax CUBIN per dtype (`evo_softmax_rows` compiled with EVO_BF16=0 / 1).
    pub fn cublas_hybrid(
        &self,
        softmax_cubins: &[(Dtype, Vec<u8>)],
    ) -> Result<HybridKernel, GateError> {
        // SAFETY: only tries to dlopen libcublas by its usual names.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(GateError::Blas {
                during: "loading libcublas".into(),
                message: "libcublas was not found by the dynamic loader; add the CUDA \
                          toolkit's lib64 to LD_LIBRARY_PATH"
                    .into(),
            });
        }
        let mut modules = Vec::new();
        let mut softmax = Vec::new();
        for (dtype, cubin) in softmax_cubins {
            let module = self.load_module("the hybrid softmax", cubin)?;
            softmax.push((
                *dtype,
                evo_runtime::function(&module, "the hybrid softmax", ENTRY_SOFTMAX)?,
            ));
            modules.push(module);
        }
        let blas = CudaBlas::new(self.stream.clone()).map_err(|e| GateError::Blas {
            during: "creating the cuBLAS handle".into(),
            message: format!("{e:?}"),
        })?;
        Ok(HybridKernel::new(
            self.ctx.clone(),
            self.stream.clone(),
            blas,
            modules,
            softmax,
            self.verifier.get().cloned(),
        ))
    }
}

/// The device address of a buffer (all work is on the device's one stream, so the
/// synchronisation guard cudarc returns is not needed).
fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

fn alloc<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
    what: &str,
) -> Result<CudaSlice<T>, GateError> {
    stream
        .alloc_zeros::<T>(n.max(1))
        .map_err(driver(format!("allocating {what} ({n} elements)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_open_is_a_typed_error_not_a_panic() {
        // On CI (no driver) this is NoDevice; on the GPU machine it opens.
        match Device::open(0) {
            Ok(d) => assert!(!d.name().is_empty()),
            Err(GateError::NoDevice(msg)) => {
                assert!(msg.contains("lib") || msg.contains("GPU"), "{msg}")
            }
            Err(other) => panic!("expected NoDevice, got {other}"),
        }
    }
}
