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
//! Rooms: [`abi`] (what a module declares: geometry, tensor maps), [`blas`] (the two
//! products as cuBLAS GEMMs, for the hybrid and the reference), [`rig`] (FAST's
//! resident input slots, their archive and guards), [`launch`] (a kernel's arguments,
//! graphs whose launches are re-pointed every repeat, event timing), [`loaded`] (an
//! ABI kernel), [`hybrid`] (the cuBLAS baseline), [`verifier`] (the device's input
//! generator, fp32 reference and row-by-row comparison).

mod abi;
mod blas;
mod hybrid;
mod launch;
mod loaded;
mod rig;
mod verifier;

pub use abi::{Geometry, TensorMapSpec};
pub use hybrid::HybridKernel;
pub use loaded::LoadedKernel;

use crate::error::GateError;
use crate::inputs::Inputs;
use cudarc::cublas::{sys as blas_sys, CudaBlas};
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;
use evo_genome::{Dtype, Problem, Target};
use rig::Slots;
use std::sync::Arc;
use verifier::{DrawJob, Verifier};

/// Symbols of the kernel ABI (kernels/ABI.md).
pub const ENTRY_FWD: &str = "evo_attention_fwd";
pub const ENTRY_COMBINE: &str = "evo_attention_combine";
pub const GEOMETRY_SYMBOL: &str = "evo_geometry";
/// A kernel that loads through the copy engine exports this (kernels/ABI.md, "Tensor maps").
pub const TENSOR_MAPS_SYMBOL: &str = "evo_tensor_maps";
/// A persistent kernel exports this: CTAs per SM (kernels/ABI.md, "Persistent kernels").
pub const PERSISTENT_SYMBOL: &str = "evo_persistent";
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
        message: e
            .error_string()
            .map(|s| format!("{} ({:?})", s.to_string_lossy(), e.0))
            .unwrap_or_else(|_| format!("{:?}", e.0)),
    }
}

/// One GPU: its context and stream.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    compute_capability: (i32, i32),
    max_smem_optin: u32,
    sm_count: u32,
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
        // SAFETY: only tries to dlopen libcuda by its usual names; no symbol is called.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
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
        let max_smem_optin = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )
            .map_err(driver("reading the shared-memory limit"))? as u32;
        let sm_count = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(driver("reading the SM count"))? as u32;
        Ok(Device {
            ctx,
            stream,
            name,
            compute_capability,
            max_smem_optin,
            sm_count,
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

    fn function(
        module: &Arc<CudaModule>,
        what: &str,
        entry: &str,
    ) -> Result<CudaFunction, GateError> {
        module.load_function(entry).map_err(|e| {
            GateError::Abi(format!(
                "{what} has no kernel `{entry}` ({e}); declare it `extern \"C\" __global__` \
                 with the signature of kernels/ABI.md"
            ))
        })
    }

    /// Loads an attention kernel (CUBIN following kernels/ABI.md) and reads its geometry.
    pub fn load_attention(&self, name: &str, cubin: &[u8]) -> Result<LoadedKernel, GateError> {
        let module = self.load_module(name, cubin)?;
        let fwd = Self::function(&module, name, ENTRY_FWD)?;
        let symbol = module
            .get_global(GEOMETRY_SYMBOL, &self.stream)
            .map_err(|e| {
                GateError::Abi(format!(
                    "{name} has no `{GEOMETRY_SYMBOL}` symbol ({e}); declare \
                 `extern \"C\" __constant__ int {GEOMETRY_SYMBOL}[6] = {{block_m, \
                 threads_per_block, smem_bytes, split_kv, combine_rows_per_block, \
                 combine_threads}};` (kernels/ABI.md)"
                ))
            })?;
        if symbol.len() < 24 {
            return Err(GateError::Abi(format!(
                "{name}: `{GEOMETRY_SYMBOL}` is {} bytes, expected int[6] (24 bytes)",
                symbol.len()
            )));
        }
        let raw: Vec<u8> = self
            .stream
            .clone_dtoh(&symbol)
            .map_err(driver(format!("reading {GEOMETRY_SYMBOL} of {name}")))?;
        let ints: Vec<i32> = raw[..24]
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut geometry =
            Geometry::from_ints(&ints).map_err(|m| GateError::Abi(format!("{name}: {m}")))?;
        geometry
            .check(self.max_smem_optin)
            .map_err(|m| GateError::Abi(format!("{name}: {m}")))?;
        let combine = if geometry.split_kv > 1 {
            Some(Self::function(&module, name, ENTRY_COMBINE)?)
        } else {
            None
        };
        let tensor_maps = match self.declared_ints(&module, cubin, name, TENSOR_MAPS_SYMBOL, 4)? {
            None => None,
            Some(ints) => Some(
                TensorMapSpec::from_ints(&ints)
                    .map_err(|m| GateError::Abi(format!("{name}: {m}")))?,
            ),
        };
        if let Some(ints) = self.declared_ints(&module, cubin, name, PERSISTENT_SYMBOL, 1)? {
            let per_sm =
                abi::persistent_ctas(&ints).map_err(|m| GateError::Abi(format!("{name}: {m}")))?;
            geometry.persistent_grid = persistent_grid_override().unwrap_or(per_sm * self.sm_count);
        }
        if geometry.smem_bytes > 48 * 1024 {
            fwd.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                geometry.smem_bytes as i32,
            )
            .map_err(driver(format!(
                "raising the dynamic shared memory of {name} to {} bytes",
                geometry.smem_bytes
            )))?;
        }
        Ok(LoadedKernel::new(
            name,
            self.ctx.clone(),
            self.stream.clone(),
            module,
            fwd,
            combine,
            geometry,
            tensor_maps,
            self.spare.clone(),
            self.verifier.get().cloned(),
        ))
    }

    /// The first `n` ints of an optional ABI symbol, None when the module does not
    /// declare it. Only a module whose symbol table names it is asked for it: a failed
    /// look-up is a driver error that compute-sanitizer counts against the run.
    fn declared_ints(
        &self,
        module: &Arc<CudaModule>,
        cubin: &[u8],
        name: &str,
        symbol: &str,
        n: usize,
    ) -> Result<Option<Vec<i32>>, GateError> {
        if !cubin.windows(symbol.len()).any(|w| w == symbol.as_bytes()) {
            return Ok(None);
        }
        let Ok(global) = module.get_global(symbol, &self.stream) else {
            return Ok(None);
        };
        let raw: Vec<u8> = self
            .stream
            .clone_dtoh(&global)
            .map_err(driver(format!("reading {symbol} of {name}")))?;
        if raw.len() < 4 * n {
            return Err(GateError::Abi(format!(
                "{name}: `{symbol}` is {} bytes, expected int[{n}] ({} bytes)",
                raw.len(),
                4 * n
            )));
        }
        Ok(Some(
            raw[..4 * n]
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
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
                Self::function(&module, "the hybrid softmax", ENTRY_SOFTMAX)?,
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
    fn geometry_is_checked_against_the_device() {
        let ok = Geometry::from_ints(&[64, 128, 40960, 1, 0, 0]).unwrap();
        assert!(ok.check(227 * 1024).is_ok());
        assert!(ok.check(32 * 1024).unwrap_err().contains("smem_bytes"));
        let split = Geometry::from_ints(&[64, 128, 0, 4, 0, 0]).unwrap();
        assert!(split.check(227 * 1024).unwrap_err().contains("combine"));
        assert!(Geometry::from_ints(&[64, -1, 0, 1, 0, 0])
            .unwrap_err()
            .contains("threads_per_block"));
        let zero = Geometry::from_ints(&[64, 128, 0, 0, 0, 0]).unwrap();
        assert!(zero.check(1 << 20).unwrap_err().contains("split_kv"));
    }

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
