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

use crate::error::GateError;
use crate::inputs::{fresh_output, guard_breach, Inputs, GUARD_BITS, GUARD_ELEMS, GUARD_F32_BITS};
use crate::kernel::{pool_index, AttentionKernel, Output, TimingMethod};
use cudarc::cublas::{result as blas_result, sys as blas_sys, CudaBlas};
use cudarc::driver::sys::{
    CUevent_flags, CUfunction_attribute, CUgraphInstantiate_flags, CUstreamCaptureMode,
};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;
use evo_genome::{Dtype, Problem, Target};
use std::sync::Arc;

/// Symbols of the kernel ABI (kernels/ABI.md).
pub const ENTRY_FWD: &str = "evo_attention_fwd";
pub const ENTRY_COMBINE: &str = "evo_attention_combine";
pub const GEOMETRY_SYMBOL: &str = "evo_geometry";
/// A kernel that loads through the copy engine exports this (kernels/ABI.md, "Tensor maps").
pub const TENSOR_MAPS_SYMBOL: &str = "evo_tensor_maps";
/// The hybrid baseline's softmax entry point.
pub const ENTRY_SOFTMAX: &str = "evo_softmax_rows";

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
    spare: Spare,
}

/// FAST's buffers of the last kernel timed on a device, kept for the next one: every
/// input set, every O and the pool, on the device (about 100 MB at the seed shape). A
/// kernel timed on the same problem and set count takes them instead of allocating its
/// own; the pool goes up again only when it differs, which in a search it mostly does
/// (consecutive candidates draw different seeds). Measured on an H100: FAST's
/// preparation 30 → 22 ms a candidate. Their contents need no reset:
/// each timed repeat refills every set from the pool and poisons every O before the
/// launches. Only buffers whose kernel passed FAST's verification are kept
/// ([`AttentionKernel::timing_verified`]); a confirmation asks for fresh ones
/// ([`Device::drop_spare_buffers`]).
type Spare = Arc<std::sync::Mutex<Option<IoBuffers>>>;

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
        Ok(Device {
            ctx,
            stream,
            name,
            compute_capability,
            max_smem_optin,
            spare: Spare::default(),
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
        let geometry =
            Geometry::from_ints(&ints).map_err(|m| GateError::Abi(format!("{name}: {m}")))?;
        geometry
            .check(self.max_smem_optin)
            .map_err(|m| GateError::Abi(format!("{name}: {m}")))?;
        let combine = if geometry.split_kv > 1 {
            Some(Self::function(&module, name, ENTRY_COMBINE)?)
        } else {
            None
        };
        // Only a module whose symbol table names `evo_tensor_maps` is asked for it: a
        // failed look-up is a driver error that compute-sanitizer counts against the run.
        let declares_maps = cubin
            .windows(TENSOR_MAPS_SYMBOL.len())
            .any(|w| w == TENSOR_MAPS_SYMBOL.as_bytes());
        let lookup = if declares_maps {
            module.get_global(TENSOR_MAPS_SYMBOL, &self.stream).ok()
        } else {
            None
        };
        let tensor_maps = match lookup {
            None => None,
            Some(symbol) => {
                let raw: Vec<u8> = self
                    .stream
                    .clone_dtoh(&symbol)
                    .map_err(driver(format!("reading {TENSOR_MAPS_SYMBOL} of {name}")))?;
                if raw.len() < 16 {
                    return Err(GateError::Abi(format!(
                        "{name}: `{TENSOR_MAPS_SYMBOL}` is {} bytes, expected int[4] (16 bytes)",
                        raw.len()
                    )));
                }
                let ints: Vec<i32> = raw[..16]
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Some(
                    TensorMapSpec::from_ints(&ints)
                        .map_err(|m| GateError::Abi(format!("{name}: {m}")))?,
                )
            }
        };
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
        Ok(LoadedKernel {
            name: name.to_string(),
            ctx: self.ctx.clone(),
            stream: self.stream.clone(),
            _module: module,
            fwd,
            combine,
            geometry,
            tensor_maps,
            maps: Vec::new(),
            buffers: None,
            graph: None,
            spare: self.spare.clone(),
            verified: false,
        })
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
        Ok(HybridKernel {
            ctx: self.ctx.clone(),
            stream: self.stream.clone(),
            blas,
            _modules: modules,
            softmax,
            buffers: None,
            scratch: None,
            graph: None,
        })
    }
}

/// The launch geometry a kernel module declares in `evo_geometry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    pub block_m: u32,
    pub threads: u32,
    pub smem_bytes: u32,
    pub split_kv: u32,
    pub combine_rows: u32,
    pub combine_threads: u32,
}

impl Geometry {
    /// From the six ints of `evo_geometry`, refusing values no launch can use.
    pub fn from_ints(v: &[i32]) -> Result<Geometry, String> {
        let names = [
            "block_m",
            "threads_per_block",
            "smem_bytes",
            "split_kv",
            "combine_rows_per_block",
            "combine_threads",
        ];
        for (i, name) in names.iter().enumerate() {
            if v[i] < 0 {
                return Err(format!("evo_geometry[{i}] ({name}) is negative ({})", v[i]));
            }
        }
        Ok(Geometry {
            block_m: v[0] as u32,
            threads: v[1] as u32,
            smem_bytes: v[2] as u32,
            split_kv: v[3] as u32,
            combine_rows: v[4] as u32,
            combine_threads: v[5] as u32,
        })
    }

    /// Checks the geometry against the device limits.
    pub fn check(&self, max_smem_optin: u32) -> Result<(), String> {
        if self.block_m == 0 {
            return Err("evo_geometry[0] (block_m) is 0".into());
        }
        if !(1..=1024).contains(&self.threads) {
            return Err(format!(
                "evo_geometry[1] (threads_per_block) is {}; it must be 1..=1024",
                self.threads
            ));
        }
        if self.smem_bytes > max_smem_optin {
            return Err(format!(
                "evo_geometry[2] (smem_bytes) is {}, over the device's {} bytes per block",
                self.smem_bytes, max_smem_optin
            ));
        }
        if self.split_kv == 0 {
            return Err("evo_geometry[3] (split_kv) is 0; use 1 for no split".into());
        }
        if self.split_kv > 1
            && (self.combine_rows == 0 || !(1..=1024).contains(&self.combine_threads))
        {
            return Err(format!(
                "split_kv is {} but the combine geometry (rows {}, threads {}) cannot be launched",
                self.split_kv, self.combine_rows, self.combine_threads
            ));
        }
        Ok(())
    }
}

/// The tensor maps a copy-engine kernel asks for in `evo_tensor_maps`: rows of the Q
/// box, rows of the K/V box, elements per box row, swizzle bytes (kernels/ABI.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TensorMapSpec {
    pub q_rows: u32,
    pub kv_rows: u32,
    pub box_cols: u32,
    pub swizzle: u32,
}

impl TensorMapSpec {
    /// From the four ints of `evo_tensor_maps`, refusing boxes the copy engine rejects.
    pub fn from_ints(v: &[i32]) -> Result<TensorMapSpec, String> {
        let rows_ok = |r: i32| (1..=256).contains(&r);
        if !rows_ok(v[0]) || !rows_ok(v[1]) {
            return Err(format!(
                "{TENSOR_MAPS_SYMBOL} asks for boxes of {} (Q) and {} (K/V) rows; a box \
                 has 1..=256 rows",
                v[0], v[1]
            ));
        }
        if v[2] != 64 || v[3] != 128 {
            return Err(format!(
                "{TENSOR_MAPS_SYMBOL} asks for {} elements per box row with a {}-byte swizzle; \
                 evo builds 64-element (128-byte) rows with the 128-byte swizzle: declare \
                 {{q_rows, kv_rows, 64, 128}}",
                v[2], v[3]
            ));
        }
        Ok(TensorMapSpec {
            q_rows: v[0] as u32,
            kv_rows: v[1] as u32,
            box_cols: 64,
            swizzle: 128,
        })
    }
}

/// A `CUtensorMap` passed by value as a `__grid_constant__` kernel parameter.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct TensorMapArg([u64; 16]);

// SAFETY: a plain 128-byte, 64-byte-aligned value that the kernel reads as its
// `const __grid_constant__ CUtensorMap` parameter (the driver copies the bytes).
unsafe impl DeviceRepr for TensorMapArg {}

/// Encodes the 3-D map (D, L, B*H) of one [B, H, L, D] tensor: boxes of
/// `spec.box_cols` x `rows` x 1, 128-byte swizzle, zeros for elements past L (so the
/// partial tile of a head never reads the next head's rows).
fn encode_tensor_map(
    base: u64,
    p: &Problem,
    len: u32,
    rows: u32,
    spec: &TensorMapSpec,
) -> Result<TensorMapArg, GateError> {
    use cudarc::driver::sys as cu;
    let d = p.head_dim.get() as u64;
    let dims = [d, len as u64, (p.batch * p.heads) as u64];
    let strides = [d * 2, len as u64 * d * 2];
    let boxes = [spec.box_cols, rows, 1u32];
    let element_strides = [1u32; 3];
    let dtype = match p.dtype {
        Dtype::F16 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        Dtype::Bf16 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    };
    let mut map = cu::CUtensorMap_st { opaque: [0; 16] };
    // SAFETY: every pointer refers to a live local array of the length the rank (3)
    // implies; `base` is a device allocation of B*H*len*D 16-bit elements.
    let status = unsafe {
        cu::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            3,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    status.result().map_err(driver(format!(
        "encoding a tensor map for {p} (box {}x{rows})",
        spec.box_cols
    )))?;
    Ok(TensorMapArg(map.opaque))
}

fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// Q, K, V and O of one problem, `sets` times over, and the timing pool they are
/// refilled from. Every O is followed by a guard region of [`GUARD_ELEMS`] elements.
///
/// Each tensor of every set lives in one allocation (set `i` at offset `i` times its
/// size), and so does each tensor of the pool: refilling every set from the pool's
/// rotated entries is then two copies per tensor, and poisoning every O (guards
/// restored) one, instead of four copies per set. A repeat's refresh costs seven
/// stream operations whatever the number of sets.
struct IoBuffers {
    problem: Problem,
    sets: usize,
    /// Q, K, V of all sets, and O (each followed by its guard) of all sets.
    q: CudaSlice<u16>,
    k: CudaSlice<u16>,
    v: CudaSlice<u16>,
    o: CudaSlice<u16>,
    /// Pool entries (empty outside timing): `pool_len` Q, K and V, back to back.
    pool_len: usize,
    /// What determines the pool's contents: each entry's problem, seed and Q gain.
    pool_key: Vec<(Problem, u64, u32)>,
    pool_q: Option<CudaSlice<u16>>,
    pool_k: Option<CudaSlice<u16>>,
    pool_v: Option<CudaSlice<u16>>,
    /// Every set's O poisoned with its guard: what the O of all sets is reset to.
    fresh_o: CudaSlice<u16>,
}

impl IoBuffers {
    /// `sets` sets, the first holding `first` (GREEN's inputs), or all refilled from
    /// `pool` before every timed repeat.
    fn new(
        stream: &Arc<CudaStream>,
        problem: Problem,
        sets: usize,
        pool: &[&Inputs],
    ) -> Result<IoBuffers, GateError> {
        let p = problem;
        let sets = sets.max(1);
        let one_o = fresh_output(&p);
        let mut all_o = Vec::with_capacity(one_o.len() * sets);
        for _ in 0..sets {
            all_o.extend_from_slice(&one_o);
        }
        let fresh_o = stream.clone_htod(&all_o).map_err(driver("allocating O"))?;
        let mut o = alloc::<u16>(stream, all_o.len(), "O")?;
        stream
            .memcpy_dtod(&fresh_o, &mut o)
            .map_err(driver("poisoning O"))?;
        let mut io = IoBuffers {
            problem: p,
            sets,
            q: alloc::<u16>(stream, p.q_elems() * sets, "Q")?,
            k: alloc::<u16>(stream, p.kv_elems() * sets, "K")?,
            v: alloc::<u16>(stream, p.kv_elems() * sets, "V")?,
            o,
            pool_len: 0,
            pool_key: Vec::new(),
            pool_q: None,
            pool_k: None,
            pool_v: None,
            fresh_o,
        };
        io.upload_pool(stream, pool)?;
        Ok(io)
    }

    /// Elements of one set's O with its guard.
    fn o_stride(&self) -> usize {
        self.problem.q_elems() + GUARD_ELEMS
    }

    /// Device addresses of set `set`'s Q, K, V and O.
    fn ptrs(&self, set: usize, stream: &CudaStream) -> [u64; 4] {
        let p = &self.problem;
        let at = |base: u64, elems: usize| base + (set * elems * 2) as u64;
        [
            at(ptr(&self.q, stream), p.q_elems()),
            at(ptr(&self.k, stream), p.kv_elems()),
            at(ptr(&self.v, stream), p.kv_elems()),
            at(ptr(&self.o, stream), self.o_stride()),
        ]
    }

    /// Makes `pool` the resident pool; uploads nothing when it already is (the same
    /// problem, seeds and gains draw the same tensors).
    fn upload_pool(&mut self, stream: &Arc<CudaStream>, pool: &[&Inputs]) -> Result<(), GateError> {
        let key: Vec<(Problem, u64, u32)> = pool
            .iter()
            .map(|i| (i.problem, i.seed, i.q_gain.to_bits()))
            .collect();
        if self.pool_len > 0 && self.pool_len == pool.len() && self.pool_key == key {
            return Ok(());
        }
        self.pool_len = 0;
        self.pool_key = key;
        (self.pool_q, self.pool_k, self.pool_v) = (None, None, None);
        if pool.is_empty() {
            return Ok(());
        }
        let join = |f: &dyn Fn(&Inputs) -> &Vec<u16>| {
            let mut all = Vec::with_capacity(pool.iter().map(|i| f(i).len()).sum());
            for inputs in pool {
                all.extend_from_slice(f(inputs));
            }
            all
        };
        let up = |host: Vec<u16>, what: &str| {
            stream
                .clone_htod(&host)
                .map_err(driver(format!("uploading the pool's {what}")))
        };
        self.pool_q = Some(up(join(&|i| &i.q), "Q")?);
        self.pool_k = Some(up(join(&|i| &i.k), "K")?);
        self.pool_v = Some(up(join(&|i| &i.v), "V")?);
        self.pool_len = pool.len();
        Ok(())
    }

    /// Re-fills the first set with new inputs and a poisoned O (guard restored).
    fn refill(&mut self, stream: &Arc<CudaStream>, inputs: &Inputs) -> Result<(), GateError> {
        let (nq, nkv, no) = (
            self.problem.q_elems(),
            self.problem.kv_elems(),
            self.o_stride(),
        );
        stream
            .memcpy_htod(&inputs.q, &mut self.q.slice_mut(0..nq))
            .map_err(driver("uploading Q"))?;
        stream
            .memcpy_htod(&inputs.k, &mut self.k.slice_mut(0..nkv))
            .map_err(driver("uploading K"))?;
        stream
            .memcpy_htod(&inputs.v, &mut self.v.slice_mut(0..nkv))
            .map_err(driver("uploading V"))?;
        stream
            .memcpy_dtod(&self.fresh_o.slice(0..no), &mut self.o.slice_mut(0..no))
            .map_err(driver("poisoning O"))?;
        Ok(())
    }

    /// Before timed repeat `repeat`: every O poisoned, every set refilled from the
    /// pool (device to device, so the repeat's launches meet inputs and outputs they
    /// have not seen in this state). Set `i` takes pool entry
    /// [`pool_index`]`(i, repeat, pool_len)`: consecutive sets take consecutive
    /// entries, so the sets are two runs of the pool at most.
    fn refresh(&mut self, stream: &Arc<CudaStream>, repeat: usize) -> Result<(), GateError> {
        let (Some(pq), Some(pk), Some(pv)) = (&self.pool_q, &self.pool_k, &self.pool_v) else {
            return Err(GateError::Abi("timed before prepare_timing".into()));
        };
        let n = self.pool_len;
        let first = pool_index(0, repeat, n);
        // Sets [0, a) from entries [first, first + a), sets [a, sets) from entries [0, ..).
        let a = self.sets.min(n - first);
        let runs = [(0, first, a), (a, 0, self.sets - a)];
        let (nq, nkv) = (self.problem.q_elems(), self.problem.kv_elems());
        for (to, from, count) in runs {
            if count == 0 {
                continue;
            }
            let copy =
                |src: &CudaSlice<u16>, dst: &mut CudaSlice<u16>, elems: usize, what: &str| {
                    stream
                        .memcpy_dtod(
                            &src.slice(from * elems..(from + count) * elems),
                            &mut dst.slice_mut(to * elems..(to + count) * elems),
                        )
                        .map_err(driver(format!("refilling {what}")))
                };
            copy(pq, &mut self.q, nq, "Q")?;
            copy(pk, &mut self.k, nkv, "K")?;
            copy(pv, &mut self.v, nkv, "V")?;
        }
        stream
            .memcpy_dtod(&self.fresh_o, &mut self.o)
            .map_err(driver("poisoning O"))?;
        Ok(())
    }

    /// Every set's O and whether its guard still holds, from one download.
    fn outputs_upto(
        &self,
        stream: &Arc<CudaStream>,
        sets: usize,
    ) -> Result<Vec<Output>, GateError> {
        let stride = self.o_stride();
        let all = stream
            .clone_dtoh(&self.o.slice(0..stride * sets))
            .map_err(driver("downloading O"))?;
        Ok(all
            .chunks_exact(stride)
            .map(|chunk| {
                let (o, guard) = chunk.split_at(self.problem.q_elems());
                Output {
                    o: o.to_vec(),
                    guard_breach: guard_breach("O", guard, GUARD_BITS),
                }
            })
            .collect())
    }

    /// Set 0's O and whether its guard still holds.
    fn output(&self, stream: &Arc<CudaStream>) -> Result<Output, GateError> {
        Ok(self
            .outputs_upto(stream, 1)?
            .pop()
            .expect("one set downloaded"))
    }

    fn outputs(&self, stream: &Arc<CudaStream>) -> Result<Vec<Output>, GateError> {
        self.outputs_upto(stream, self.sets)
    }
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

/// Events with timing enabled: cudarc's `new_event(None)` creates them with
/// `CU_EVENT_DISABLE_TIMING`, whose elapsed time is an error.
fn timed<F: FnMut() -> Result<(), GateError>>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    mut body: F,
) -> Result<f64, GateError> {
    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver("creating a timing event"))?;
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver("creating a timing event"))?;
    start
        .record(stream)
        .map_err(driver("recording the start event"))?;
    body()?;
    end.record(stream)
        .map_err(driver("recording the end event"))?;
    let ms = start
        .elapsed_ms(&end)
        .map_err(driver("waiting for the timed calls"))?;
    Ok(ms as f64)
}

/// Captures `calls` calls of `launch` into a graph (a capture is always ended, also
/// when a call fails inside it, so the stream is usable afterwards).
fn capture<F: FnMut() -> Result<(), GateError>>(
    stream: &Arc<CudaStream>,
    calls: u32,
    mut launch: F,
) -> Result<CudaGraph, GateError> {
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .map_err(driver("beginning a graph capture"))?;
    let mut result = Ok(());
    for _ in 0..calls {
        result = launch();
        if result.is_err() {
            break;
        }
    }
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    result?;
    let graph = graph
        .map_err(driver("ending the graph capture"))?
        .ok_or_else(|| GateError::Driver {
            during: "ending the graph capture".into(),
            message: "the capture produced no graph".into(),
        })?;
    graph.upload().map_err(driver("uploading the graph"))?;
    Ok(graph)
}

/// The split-KV workspace: `ws_o` and `ws_lse`, each followed by [`GUARD_ELEMS`]
/// guard floats, and the poisoned copies they are reset from.
struct Workspace {
    ws_o: CudaSlice<f32>,
    ws_lse: CudaSlice<f32>,
    fresh_o: CudaSlice<f32>,
    fresh_lse: CudaSlice<f32>,
    /// Floats of ws_o and ws_lse before their guards.
    lens: (usize, usize),
}

impl Workspace {
    fn new(stream: &Arc<CudaStream>, o_len: usize, lse_len: usize) -> Result<Workspace, GateError> {
        let fresh = |n: usize, what: &str| {
            let mut v = vec![f32::NAN; n + GUARD_ELEMS];
            v[n..].fill(f32::from_bits(GUARD_F32_BITS));
            stream
                .clone_htod(&v)
                .map_err(driver(format!("allocating {what}")))
        };
        let (fresh_o, fresh_lse) = (fresh(o_len, "ws_o")?, fresh(lse_len, "ws_lse")?);
        Ok(Workspace {
            ws_o: fresh(o_len, "ws_o")?,
            ws_lse: fresh(lse_len, "ws_lse")?,
            fresh_o,
            fresh_lse,
            lens: (o_len, lse_len),
        })
    }

    /// Poisons both halves with NaN (a combine that reads a slot the forward kernel
    /// never wrote produces NaN, not a stale value) and restores their guards.
    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), GateError> {
        stream
            .memcpy_dtod(&self.fresh_o, &mut self.ws_o)
            .map_err(driver("poisoning ws_o"))?;
        stream
            .memcpy_dtod(&self.fresh_lse, &mut self.ws_lse)
            .map_err(driver("poisoning ws_lse"))
    }

    /// Whether a call wrote past the end of either half.
    fn breach(&self, stream: &Arc<CudaStream>) -> Result<Option<String>, GateError> {
        let pattern = GUARD_F32_BITS;
        for (what, buf, len) in [
            ("ws_o", &self.ws_o, self.lens.0),
            ("ws_lse", &self.ws_lse, self.lens.1),
        ] {
            let guard: Vec<u32> = stream
                .clone_dtoh(&buf.slice(len..))
                .map_err(driver(format!("downloading the guard of {what}")))?
                .iter()
                .map(|x: &f32| x.to_bits())
                .collect();
            if let Some(b) = guard_breach(what, &guard, pattern) {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }
}

/// A loaded attention kernel (generated or hand-written), ready for the gates.
pub struct LoadedKernel {
    name: String,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    fwd: CudaFunction,
    combine: Option<CudaFunction>,
    geometry: Geometry,
    /// Set when the kernel loads through the copy engine: `evo_attention_fwd` then
    /// takes the Q, K and V tensor maps first.
    tensor_maps: Option<TensorMapSpec>,
    /// The tensor maps of each input set (Q, K, V), encoded when the buffers are made.
    maps: Vec<[TensorMapArg; 3]>,
    buffers: Option<(IoBuffers, Option<Workspace>)>,
    graph: Option<(u32, CudaGraph)>,
    /// The device's kept timing buffers: taken when prepared, given back when dropped.
    spare: Spare,
    /// The timed outputs of the current buffers passed FAST's verification.
    verified: bool,
}

impl Drop for LoadedKernel {
    fn drop(&mut self) {
        if !self.verified {
            return;
        }
        if let Some((io, _)) = self.buffers.take() {
            if io.pool_len > 0 {
                if let Ok(mut spare) = self.spare.lock() {
                    *spare = Some(io);
                }
            }
        }
    }
}

impl LoadedKernel {
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The tensor maps the kernel asks for, if it loads through the copy engine.
    pub fn tensor_map_spec(&self) -> Option<TensorMapSpec> {
        self.tensor_maps
    }

    /// Encodes the tensor maps of every input set (a no-op for kernels without them).
    fn encode_maps(&mut self) -> Result<(), GateError> {
        self.maps.clear();
        let (Some(spec), Some((io, _))) = (self.tensor_maps, &self.buffers) else {
            return Ok(());
        };
        let p = io.problem;
        for set in 0..io.sets {
            let [q, k, v, _] = io.ptrs(set, &self.stream);
            self.maps.push([
                encode_tensor_map(q, &p, p.q_len, spec.q_rows, &spec)?,
                encode_tensor_map(k, &p, p.kv_len, spec.kv_rows, &spec)?,
                encode_tensor_map(v, &p, p.kv_len, spec.kv_rows, &spec)?,
            ]);
        }
        Ok(())
    }

    /// Buffers for `sets` sets of `problem` (reused when they match) and the pool.
    fn ensure_buffers(
        &mut self,
        problem: Problem,
        sets: usize,
        pool: &[&Inputs],
    ) -> Result<(), GateError> {
        let p = problem;
        self.graph = None;
        self.verified = false;
        let reuse = matches!(&self.buffers, Some((b, _)) if b.problem == p && b.sets == sets);
        if reuse {
            let (b, _) = self.buffers.as_mut().expect("checked above");
            return b.upload_pool(&self.stream, pool);
        }
        self.buffers = None;
        // The last timed kernel's buffers, when they fit: the pool is uploaded again
        // only if it differs.
        let kept = if pool.is_empty() {
            None
        } else {
            self.spare
                .lock()
                .ok()
                .and_then(|mut spare| spare.take_if(|b| b.problem == p && b.sets == sets.max(1)))
        };
        let io = match kept {
            Some(mut io) => {
                io.upload_pool(&self.stream, pool)?;
                io
            }
            None => IoBuffers::new(&self.stream, p, sets, pool)?,
        };
        let ws = if self.geometry.split_kv > 1 {
            let split = self.geometry.split_kv as usize;
            let rows = (p.batch * p.heads * p.q_len) as usize;
            Some(Workspace::new(
                &self.stream,
                split * rows * p.head_dim.get() as usize,
                split * rows,
            )?)
        } else {
            None
        };
        self.buffers = Some((io, ws));
        self.encode_maps()
    }

    fn poison_workspace(&mut self) -> Result<(), GateError> {
        if let Some((_, Some(ws))) = &mut self.buffers {
            ws.poison(&self.stream)?;
        }
        Ok(())
    }

    fn workspace_breach(&self) -> Result<Option<String>, GateError> {
        match &self.buffers {
            Some((_, Some(ws))) => ws.breach(&self.stream),
            _ => Ok(None),
        }
    }

    /// Enqueues one call (forward, then combine when split) on input set `set`.
    fn launch(&self, set: usize) -> Result<(), GateError> {
        let (io, ws) = self
            .buffers
            .as_ref()
            .ok_or_else(|| GateError::Abi("launch before buffers".into()))?;
        let p = io.problem;
        let g = self.geometry;
        let [pq, pk, pv, po] = io.ptrs(set, &self.stream);
        let (pws_o, pws_l) = match ws {
            Some(w) => (ptr(&w.ws_o, &self.stream), ptr(&w.ws_lse, &self.stream)),
            None => (0u64, 0u64),
        };
        let (b, h, lq, lk) = (
            p.batch as i32,
            p.heads as i32,
            p.q_len as i32,
            p.kv_len as i32,
        );
        let causal = p.causal as i32;
        let scale = 1.0f32 / (p.head_dim.get() as f32).sqrt();
        let cfg = LaunchConfig {
            grid_dim: (p.q_len.div_ceil(g.block_m), p.batch * p.heads, g.split_kv),
            block_dim: (g.threads, 1, 1),
            shared_mem_bytes: g.smem_bytes,
        };
        let mut args = self.stream.launch_builder(&self.fwd);
        if self.tensor_maps.is_some() {
            let [mq, mk, mv] = self.maps.get(set).ok_or_else(|| {
                GateError::Abi(format!("{}: no tensor maps for input set {set}", self.name))
            })?;
            args.arg(mq).arg(mk).arg(mv);
        }
        args.arg(&pq)
            .arg(&pk)
            .arg(&pv)
            .arg(&po)
            .arg(&pws_o)
            .arg(&pws_l)
            .arg(&b)
            .arg(&h)
            .arg(&lq)
            .arg(&lk)
            .arg(&causal)
            .arg(&scale);
        // SAFETY: the argument list is the ABI's (kernels/ABI.md): for a copy-engine
        // kernel three tensor maps of this set's Q, K and V first; then six device pointers
        // (Q, K, V, O sized for this problem; ws sized split·B·H·Lq·D and split·B·H·Lq
        // floats, or null when split_kv is 1), five ints and a float; the grid is the
        // ABI's and was checked against the device limits in `Geometry::check`.
        unsafe { args.launch(cfg) }
            .map_err(driver(format!("launching {} of {}", ENTRY_FWD, self.name)))?;
        if let Some(combine) = &self.combine {
            let splits = g.split_kv as i32;
            let cfg = LaunchConfig {
                grid_dim: (p.q_len.div_ceil(g.combine_rows), p.batch * p.heads, 1),
                block_dim: (g.combine_threads, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut args = self.stream.launch_builder(combine);
            args.arg(&pws_o)
                .arg(&pws_l)
                .arg(&po)
                .arg(&b)
                .arg(&h)
                .arg(&lq)
                .arg(&splits);
            // SAFETY: the ABI's combine signature; the workspace is the one the forward
            // kernel just wrote, O has B·H·Lq·D elements.
            unsafe { args.launch(cfg) }.map_err(driver(format!(
                "launching {} of {}",
                ENTRY_COMBINE, self.name
            )))?;
        }
        Ok(())
    }
}

impl AttentionKernel for LoadedKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        let p = inputs.problem;
        let reuse = matches!(&self.buffers, Some((b, _)) if b.problem == p && b.sets == 1);
        if reuse {
            let (b, _) = self.buffers.as_mut().expect("checked above");
            b.refill(&self.stream, inputs)?;
        } else {
            self.ensure_buffers(p, 1, &[])?;
            let (b, _) = self.buffers.as_mut().expect("allocated above");
            b.refill(&self.stream, inputs)?;
        }
        self.poison_workspace()?;
        self.launch(0)?;
        self.stream
            .synchronize()
            .map_err(driver(format!("running {} on {}", self.name, p)))?;
        let (io, _) = self.buffers.as_ref().expect("allocated above");
        let mut out = io.output(&self.stream)?;
        if out.guard_breach.is_none() {
            out.guard_breach = self.workspace_breach()?;
        }
        Ok(out)
    }

    fn prepare_timing(&mut self, pool: &[&Inputs], sets: usize) -> Result<(), GateError> {
        let problem = pool
            .first()
            .map(|i| i.problem)
            .ok_or_else(|| GateError::Abi(format!("{}: an empty timing pool", self.name)))?;
        self.ensure_buffers(problem, sets, pool)
    }

    fn time_repeat(&mut self, repeat: usize, method: TimingMethod) -> Result<f64, GateError> {
        let sets = {
            let (io, _) = self.buffers.as_mut().ok_or_else(|| {
                GateError::Abi(format!("{}: timed before prepare_timing", self.name))
            })?;
            io.refresh(&self.stream, repeat)?;
            io.sets
        };
        self.poison_workspace()?;
        match method {
            TimingMethod::Events => {
                let ctx = self.ctx.clone();
                let stream = self.stream.clone();
                timed(&ctx, &stream, || {
                    (0..sets).try_for_each(|set| self.launch(set))
                })
            }
            TimingMethod::Graph => {
                if self.graph.is_none() {
                    let stream = self.stream.clone();
                    let mut set = 0;
                    let graph = capture(&stream, sets as u32, || {
                        let r = self.launch(set);
                        set += 1;
                        r
                    })?;
                    self.graph = Some((sets as u32, graph));
                }
                let (_, graph) = self.graph.as_ref().expect("captured above");
                timed(&self.ctx, &self.stream, || {
                    graph.launch().map_err(driver("replaying the graph"))
                })
            }
        }
    }

    fn timed_outputs(&mut self) -> Result<Vec<Output>, GateError> {
        self.stream.synchronize().map_err(driver(format!(
            "finishing the timed calls of {}",
            self.name
        )))?;
        let (io, _) = self
            .buffers
            .as_ref()
            .ok_or_else(|| GateError::Abi(format!("{}: no timed outputs", self.name)))?;
        let mut outs = io.outputs(&self.stream)?;
        if let Some(b) = self.workspace_breach()? {
            for o in outs.iter_mut().filter(|o| o.guard_breach.is_none()) {
                o.guard_breach = Some(b.clone());
            }
        }
        Ok(outs)
    }

    fn prepared(&self) -> Option<Problem> {
        self.buffers.as_ref().map(|(b, _)| b.problem)
    }

    fn timing_verified(&mut self) {
        self.verified = true;
    }
}

/// The seeds' cuBLAS hybrid: S = Q·Kᵀ (cuBLAS, fp32 out), P = softmax(S·scale + mask)
/// (fp32 math, 16-bit out), O = P·V (cuBLAS, 16-bit out), all on the device's stream.
pub struct HybridKernel {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    _modules: Vec<Arc<CudaModule>>,
    softmax: Vec<(Dtype, CudaFunction)>,
    buffers: Option<IoBuffers>,
    /// S (fp32) and P (16-bit), shared by the input sets: they are the hybrid's own
    /// intermediates, B·H·Lq·Lk each.
    scratch: Option<(Problem, CudaSlice<f32>, CudaSlice<u16>)>,
    graph: Option<(u32, CudaGraph)>,
}

/// Threads per row of the hybrid's softmax kernel.
const SOFTMAX_THREADS: u32 = 256;

impl HybridKernel {
    fn ensure(&mut self, p: Problem, sets: usize, pool: &[&Inputs]) -> Result<(), GateError> {
        self.graph = None;
        match &mut self.buffers {
            Some(b) if b.problem == p && b.sets == sets => b.upload_pool(&self.stream, pool)?,
            _ => {
                self.buffers = None;
                self.buffers = Some(IoBuffers::new(&self.stream, p, sets, pool)?);
            }
        }
        let p_shape = |s: &Option<(Problem, _, _)>| s.as_ref().map(|(p, _, _)| *p);
        let same_scores = p_shape(&self.scratch)
            .map(|old| {
                (old.batch, old.heads, old.q_len, old.kv_len)
                    == (p.batch, p.heads, p.q_len, p.kv_len)
            })
            .unwrap_or(false);
        if !same_scores {
            self.scratch = None;
            let n = (p.batch * p.heads) as usize * p.q_len as usize * p.kv_len as usize;
            let s = alloc::<f32>(&self.stream, n, "the hybrid's S")?;
            let pm = alloc::<u16>(&self.stream, n, "the hybrid's P")?;
            self.scratch = Some((p, s, pm));
        } else if let Some(scratch) = &mut self.scratch {
            scratch.0 = p;
        }
        Ok(())
    }

    fn launch(&self, set: usize) -> Result<(), GateError> {
        let io = self
            .buffers
            .as_ref()
            .ok_or_else(|| GateError::Abi("launch before buffers".into()))?;
        let (_, s, pm) = self
            .scratch
            .as_ref()
            .ok_or_else(|| GateError::Abi("launch before scratch".into()))?;
        let p = io.problem;
        let st = &self.stream;
        let [pq, pk, pv, po] = io.ptrs(set, st);
        let (ps, pp) = (ptr(s, st), ptr(pm, st));
        let (lq, lk, d) = (p.q_len as i32, p.kv_len as i32, p.head_dim.get() as i32);
        let bh = (p.batch * p.heads) as i32;
        let elem = match p.dtype {
            Dtype::F16 => blas_sys::cudaDataType::CUDA_R_16F,
            Dtype::Bf16 => blas_sys::cudaDataType::CUDA_R_16BF,
        };
        let (one, zero) = (1.0f32, 0.0f32);
        let blas_err = |during: &str| {
            let during = during.to_string();
            move |e: blas_result::CublasError| GateError::Blas {
                during,
                message: format!("{e:?}"),
            }
        };
        // Row-major Q [Lq, D] is column-major Qᵀ (D x Lq); S row-major [Lq, Lk] is
        // column-major Sᵀ (Lk x Lq) = K·Qᵀ: A = K read transposed, B = Q.
        // SAFETY: pointers are live device buffers of the prepared problem (K: B·H·Lk·D,
        // Q: B·H·Lq·D, S: B·H·Lq·Lk floats); the strides step one (b, h) at a time.
        unsafe {
            blas_result::gemm_strided_batched_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                lk,
                lq,
                d,
                (&one) as *const f32 as *const _,
                pk as *const _,
                elem,
                d,
                (lk as i64) * (d as i64),
                pq as *const _,
                elem,
                d,
                (lq as i64) * (d as i64),
                (&zero) as *const f32 as *const _,
                ps as *mut _,
                blas_sys::cudaDataType::CUDA_R_32F,
                lk,
                (lq as i64) * (lk as i64),
                bh,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err("the hybrid's Q·Kᵀ GEMM"))?;
        let rows = bh * lq;
        let causal = p.causal as i32;
        let scale = 1.0f32 / (d as f32).sqrt();
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (SOFTMAX_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let softmax = self
            .softmax
            .iter()
            .find(|(t, _)| *t == p.dtype)
            .map(|(_, f)| f)
            .ok_or_else(|| {
                GateError::Abi(format!(
                    "cublas-hybrid has no softmax compiled for {}",
                    p.dtype
                ))
            })?;
        let mut args = self.stream.launch_builder(softmax);
        args.arg(&ps)
            .arg(&pp)
            .arg(&lq)
            .arg(&lk)
            .arg(&rows)
            .arg(&causal)
            .arg(&scale);
        // SAFETY: `evo_softmax_rows(const float* S, T* P, int Lq, int Lk, int rows,
        // int causal, float scale)` with S and P of rows·Lk elements, one block per row.
        unsafe { args.launch(cfg) }.map_err(driver("launching the hybrid's softmax"))?;
        // O row-major [Lq, D] is column-major Oᵀ (D x Lq) = Vᵀ·Pᵀ: A = V (D x Lk
        // column-major), B = P (Lk x Lq column-major), neither transposed.
        // SAFETY: V: B·H·Lk·D, P: B·H·Lq·Lk, O: B·H·Lq·D elements of the dtype.
        unsafe {
            blas_result::gemm_strided_batched_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                d,
                lq,
                lk,
                (&one) as *const f32 as *const _,
                pv as *const _,
                elem,
                d,
                (lk as i64) * (d as i64),
                pp as *const _,
                elem,
                lk,
                (lq as i64) * (lk as i64),
                (&zero) as *const f32 as *const _,
                po as *mut _,
                elem,
                d,
                (lq as i64) * (d as i64),
                bh,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err("the hybrid's P·V GEMM"))?;
        Ok(())
    }
}

impl AttentionKernel for HybridKernel {
    fn name(&self) -> &str {
        "cublas-hybrid"
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        self.ensure(inputs.problem, 1, &[])?;
        let io = self.buffers.as_mut().expect("allocated above");
        io.refill(&self.stream, inputs)?;
        self.launch(0)?;
        self.stream.synchronize().map_err(driver(format!(
            "running cublas-hybrid on {}",
            inputs.problem
        )))?;
        let io = self.buffers.as_ref().expect("allocated above");
        io.output(&self.stream)
    }

    fn prepare_timing(&mut self, pool: &[&Inputs], sets: usize) -> Result<(), GateError> {
        let problem = pool
            .first()
            .map(|i| i.problem)
            .ok_or_else(|| GateError::Abi("cublas-hybrid: an empty timing pool".into()))?;
        self.ensure(problem, sets, pool)
    }

    fn time_repeat(&mut self, repeat: usize, method: TimingMethod) -> Result<f64, GateError> {
        let io = self
            .buffers
            .as_mut()
            .ok_or_else(|| GateError::Abi("cublas-hybrid: timed before prepare_timing".into()))?;
        io.refresh(&self.stream, repeat)?;
        let sets = io.sets;
        match method {
            TimingMethod::Events => {
                let ctx = self.ctx.clone();
                let stream = self.stream.clone();
                timed(&ctx, &stream, || {
                    (0..sets).try_for_each(|set| self.launch(set))
                })
            }
            TimingMethod::Graph => {
                if self.graph.is_none() {
                    let stream = self.stream.clone();
                    let mut set = 0;
                    let graph = capture(&stream, sets as u32, || {
                        let r = self.launch(set);
                        set += 1;
                        r
                    })?;
                    self.graph = Some((sets as u32, graph));
                }
                let (_, graph) = self.graph.as_ref().expect("captured above");
                timed(&self.ctx, &self.stream, || {
                    graph.launch().map_err(driver("replaying the graph"))
                })
            }
        }
    }

    fn timed_outputs(&mut self) -> Result<Vec<Output>, GateError> {
        self.stream
            .synchronize()
            .map_err(driver("finishing the hybrid's timed calls"))?;
        let io = self
            .buffers
            .as_ref()
            .ok_or_else(|| GateError::Abi("cublas-hybrid: no timed outputs".into()))?;
        io.outputs(&self.stream)
    }

    fn prepared(&self) -> Option<Problem> {
        self.buffers.as_ref().map(|b| b.problem)
    }
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
