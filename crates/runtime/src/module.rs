//! A kernel module loaded into a context: its two entry points, the geometry and tensor
//! maps it declares (kernels/ABI.md), checked against the device before any launch.

use crate::abi::{
    abi_version, first_abi_refuses, persistent_ctas, takes_lse, Geometry, TensorMapSpec,
    ABI_SYMBOL, ENTRY_COMBINE, ENTRY_FWD, GEOMETRY_SYMBOL, LSE_SYMBOL, PACK_GQA_SYMBOL,
    PERSISTENT_SYMBOL, TENSOR_MAPS_SYMBOL, TENSOR_MAP_O_SYMBOL,
};
use crate::error::{driver, RuntimeError};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;
use evo_genome::Problem;
use std::sync::Arc;

/// What a module is loaded from.
#[derive(Debug, Clone)]
pub enum ModuleImage {
    /// Machine code for one architecture (what NVRTC's CUBIN is): loads as is, and only
    /// on that architecture.
    Cubin(Vec<u8>),
    /// PTX text: the driver compiles it for the GPU at hand when the module loads.
    Ptx(String),
}

impl ModuleImage {
    fn bytes(&self) -> &[u8] {
        match self {
            ModuleImage::Cubin(b) => b,
            ModuleImage::Ptx(t) => t.as_bytes(),
        }
    }
}

/// One attention kernel (forward, and combine when it splits the keys) in a context.
pub struct AttentionModule {
    name: String,
    _module: Arc<CudaModule>,
    fwd: CudaFunction,
    combine: Option<CudaFunction>,
    geometry: Geometry,
    /// Set when the kernel loads through the copy engine: `evo_attention_fwd` then takes
    /// the Q, K and V tensor maps first.
    tensor_maps: Option<TensorMapSpec>,
    abi: u32,
    pack_gqa: bool,
    /// The kernel declares `evo_lse`: both entry points take `float* lse` last.
    lse: bool,
}

/// Loads a module image into `ctx`; a module built for another GPU or driver gets the
/// message that says to export it again.
pub(crate) fn load_image(
    ctx: &Arc<CudaContext>,
    name: &str,
    image: &ModuleImage,
) -> Result<Arc<CudaModule>, RuntimeError> {
    let ptx = match image {
        ModuleImage::Cubin(bytes) => Ptx::from_binary(bytes.clone()),
        ModuleImage::Ptx(text) => Ptx::from_src(text.clone()),
    };
    ctx.load_module(ptx).map_err(|e| {
        let during = format!("loading the module of {name}");
        match e.0 {
            // The one failure a user meets by copying an export to another GPU.
            cudarc::driver::sys::CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU
            | cudarc::driver::sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
            | cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_PTX => RuntimeError::Abi(format!(
                "{name} was not built for this GPU (compute capability {:?}) or \
                     this driver ({}); export the champions again for it \
                     (`evo export --arch ...`)",
                ctx.compute_capability().unwrap_or((0, 0)),
                crate::error::driver_message(&e)
            )),
            _ => driver(during)(e),
        }
    })
}

/// An entry point of a module, or an error that says how to declare it.
pub fn function(
    module: &Arc<CudaModule>,
    what: &str,
    entry: &str,
) -> Result<CudaFunction, RuntimeError> {
    module.load_function(entry).map_err(|e| {
        RuntimeError::Abi(format!(
            "{what} has no kernel `{entry}` ({e}); declare it `extern \"C\" __global__` \
             with the signature of kernels/ABI.md"
        ))
    })
}

pub(crate) fn ints(raw: &[u8]) -> Vec<i32> {
    raw.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl AttentionModule {
    /// Loads `image` (a module following kernels/ABI.md) into `ctx`, reads its geometry
    /// and tensor maps (through `stream`) and checks them against the device; raises the
    /// forward kernel's dynamic shared memory when it asks for more than 48 KiB.
    pub fn load(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        name: &str,
        image: &ModuleImage,
    ) -> Result<AttentionModule, RuntimeError> {
        let module = load_image(ctx, name, image)?;
        let fwd = function(&module, name, ENTRY_FWD)?;
        let symbol = module.get_global(GEOMETRY_SYMBOL, stream).map_err(|e| {
            RuntimeError::Abi(format!(
                "{name} has no `{GEOMETRY_SYMBOL}` symbol ({e}); declare \
                 `extern \"C\" __constant__ int {GEOMETRY_SYMBOL}[6] = {{block_m, \
                 threads_per_block, smem_bytes, split_kv, combine_rows_per_block, \
                 combine_threads}};` (kernels/ABI.md)"
            ))
        })?;
        if symbol.len() < 24 {
            return Err(RuntimeError::Abi(format!(
                "{name}: `{GEOMETRY_SYMBOL}` is {} bytes, expected int[6] (24 bytes)",
                symbol.len()
            )));
        }
        let raw: Vec<u8> = stream
            .clone_dtoh(&symbol)
            .map_err(driver(format!("reading {GEOMETRY_SYMBOL} of {name}")))?;
        let mut geometry = Geometry::from_ints(&ints(&raw[..24]))
            .map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?;
        let max_smem_optin = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(driver("reading the shared-memory limit"))?
            as u32;
        geometry
            .check(max_smem_optin)
            .map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?;
        let combine = if geometry.has_combine() {
            Some(function(&module, name, ENTRY_COMBINE)?)
        } else {
            None
        };
        let tensor_maps = match declared_ints(&module, stream, image, name, TENSOR_MAPS_SYMBOL, 4)?
        {
            None => None,
            Some(v) => Some(
                TensorMapSpec::from_ints(&v)
                    .map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?,
            ),
        };
        let tensor_maps = match (
            tensor_maps,
            declared_ints(&module, stream, image, name, TENSOR_MAP_O_SYMBOL, 1)?,
        ) {
            (spec, None) => spec,
            (Some(spec), Some(v)) => Some(
                spec.with_o(&v)
                    .map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?,
            ),
            (None, Some(_)) => {
                return Err(RuntimeError::Abi(format!(
                    "{name} declares `{TENSOR_MAP_O_SYMBOL}` but not `{TENSOR_MAPS_SYMBOL}`; \
                     a kernel that stores O by TMA takes Q, K and V's maps first: declare \
                     `{TENSOR_MAPS_SYMBOL}` too (kernels/ABI.md, \"Tensor maps\")"
                )))
            }
        };
        let abi = match declared_ints(&module, stream, image, name, ABI_SYMBOL, 1)? {
            None => 1,
            Some(v) => abi_version(&v).map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?,
        };
        let pack_gqa = match declared_ints(&module, stream, image, name, PACK_GQA_SYMBOL, 1)? {
            None => false,
            Some(v) if v[0] == 1 && abi >= 2 => true,
            Some(v) => {
                return Err(RuntimeError::Abi(format!(
                    "{name}: `{PACK_GQA_SYMBOL}` is {{{}}} in a kernel of ABI {abi}; a kernel \
                     that packs grouped heads declares {{1}} and the second ABI",
                    v[0]
                )))
            }
        };
        let lse = takes_lse(
            declared_ints(&module, stream, image, name, LSE_SYMBOL, 1)?.as_deref(),
            abi,
        )
        .map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?;
        if let Some(v) = declared_ints(&module, stream, image, name, PERSISTENT_SYMBOL, 1)? {
            let per_sm =
                persistent_ctas(&v).map_err(|m| RuntimeError::Abi(format!("{name}: {m}")))?;
            let sms = ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(driver("reading the SM count"))? as u32;
            geometry.persistent_grid = per_sm * sms;
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
        Ok(AttentionModule {
            name: name.to_string(),
            _module: module,
            fwd,
            combine,
            geometry,
            tensor_maps,
            abi,
            pack_gqa,
            lse,
        })
    }

    /// The problem as the launch shapes see it: for a kernel that packs grouped heads
    /// (`evo_pack_gqa`), one head per K/V head with `group · Lq` rows (the memory of Q
    /// and O read that way, unchanged); the problem itself otherwise. The grid, the
    /// combine, the split-KV workspace and Q's tensor map follow it; the forward kernel
    /// still takes the problem's own sizes.
    pub fn launch_view(&self, p: &Problem) -> Problem {
        packed_view(p, self.pack_gqa)
    }

    /// The ABI version the module declares (`evo_abi`; 1 when it declares none).
    pub fn abi(&self) -> u32 {
        self.abi
    }

    /// Whether the module's ABI can state `p`: the first states only multi-head
    /// attention with a top-left causal mask or none ([`Problem::is_basic`]), at head
    /// dims 64 and 128.
    pub fn states(&self, p: &Problem) -> Result<(), RuntimeError> {
        if self.abi < 2 {
            if let Some(why) = first_abi_refuses(p.head_dim) {
                return Err(RuntimeError::Unsupported(format!("{}: {why}", self.name)));
            }
        }
        if self.abi >= 2 || p.is_basic() {
            return Ok(());
        }
        Err(RuntimeError::Unsupported(format!(
            "{} is a kernel of the first ABI (it declares no `{ABI_SYMBOL}`), whose arguments \
             state only multi-head attention with a top-left causal mask or none; {p} needs \
             the second: declare `extern \"C\" __constant__ int {ABI_SYMBOL}[1] = {{2}};` \
             and take K/V heads, the diagonal and the window (kernels/ABI.md)",
            self.name
        )))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the kernel declares `evo_lse` (kernels/ABI.md, "The log-sum-exp
    /// output"): it can write the forward's log-sum-exp, and its entry points take the
    /// `lse` pointer last (null when not asked).
    pub fn writes_lse(&self) -> bool {
        self.lse
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Launches a persistent kernel on at most `ctas` CTAs (kernels/ABI.md allows any
    /// grid; the gates use a small one to make small problems loop over tiles). No
    /// effect on a kernel that is not persistent.
    pub fn cap_persistent_grid(&mut self, ctas: u32) {
        if self.geometry.persistent_grid > 0 && ctas > 0 {
            self.geometry.persistent_grid = ctas;
        }
    }

    /// The tensor maps the kernel asks for, if it loads through the copy engine.
    pub fn tensor_map_spec(&self) -> Option<TensorMapSpec> {
        self.tensor_maps
    }

    /// `evo_attention_fwd`.
    pub fn fwd(&self) -> &CudaFunction {
        &self.fwd
    }

    /// `evo_attention_combine`, when the kernel splits the keys (`split_kv > 1`) and
    /// does not merge the splits itself.
    pub fn combine(&self) -> Option<&CudaFunction> {
        self.combine.as_ref()
    }
}

/// `p` as a kernel that packs grouped heads (`pack`) is launched: `kv_heads` heads of
/// `group · Lq` rows each; `p` itself otherwise, or without groups.
pub fn packed_view(p: &Problem, pack: bool) -> Problem {
    if !pack || p.group() == 1 {
        return *p;
    }
    Problem {
        heads: p.kv_heads(),
        kv_heads: None,
        q_len: p.q_len * p.group(),
        ..*p
    }
}

/// The first `n` ints of an optional ABI symbol, None when the module does not declare
/// it. Only a module whose symbol table names it is asked for it: a failed look-up is a
/// driver error that compute-sanitizer counts against the run.
pub(crate) fn declared_ints(
    module: &Arc<CudaModule>,
    stream: &Arc<CudaStream>,
    image: &ModuleImage,
    name: &str,
    symbol: &str,
    n: usize,
) -> Result<Option<Vec<i32>>, RuntimeError> {
    if !image
        .bytes()
        .windows(symbol.len())
        .any(|w| w == symbol.as_bytes())
    {
        return Ok(None);
    }
    let Ok(global) = module.get_global(symbol, stream) else {
        return Ok(None);
    };
    let raw: Vec<u8> = stream
        .clone_dtoh(&global)
        .map_err(driver(format!("reading {symbol} of {name}")))?;
    if raw.len() < 4 * n {
        return Err(RuntimeError::Abi(format!(
            "{name}: `{symbol}` is {} bytes, expected int[{n}] ({} bytes)",
            raw.len(),
            4 * n
        )));
    }
    Ok(Some(ints(&raw[..4 * n])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packing_kernel_is_launched_over_kv_heads_with_group_times_lq_rows() {
        let p: Problem = "16,32,3,8192,128,f16,causal=br,kv=8".parse().unwrap();
        let v = packed_view(&p, true);
        assert_eq!((v.heads, v.kv_heads(), v.q_len, v.kv_len), (8, 8, 12, 8192));
        // The same Q and O elements, read in their own order.
        assert_eq!(v.q_elems(), p.q_elems());
        assert_eq!(packed_view(&p, false), p);
        let mha: Problem = "2,16,77,77,64,f16".parse().unwrap();
        assert_eq!(packed_view(&mha, true), mha);
    }
}
