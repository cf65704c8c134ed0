//! A backward module (kernels/ABI.md, "The backward ABI"): its four kernels, the geometry
//! it declares, the workspace it needs, and one call (preprocess, main, the dQ pass when
//! the design has one, postprocess when it has one) on any stream.
//!
//! The forward's [`AttentionModule`](crate::AttentionModule) and this type share the
//! loading path (images, symbol look-ups, the errors that say how to declare a symbol);
//! what differs is the ABI: four kernels with one signature instead of a forward and a
//! combine.

use crate::error::{driver, RuntimeError};
use crate::launch::{launch, Args, ShapeArgs};
use crate::module::{declared_ints, function, load_image, ModuleImage};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute, CUstream};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};
use evo_genome::Problem;
use std::ffi::c_void;
use std::sync::Arc;

/// `extern "C" __constant__ int evo_pass[1]`: 1 in a backward module.
pub const PASS_SYMBOL: &str = "evo_pass";
/// `extern "C" __constant__ int evo_bwd_geometry[10]`.
pub const BWD_GEOMETRY_SYMBOL: &str = "evo_bwd_geometry";
/// `extern "C" __constant__ int evo_deterministic[1]`: 1 when the kernels add no floats
/// in an order that varies between runs.
pub const DETERMINISTIC_SYMBOL: &str = "evo_deterministic";
/// The four kernels, in launch order.
pub const ENTRY_BWD_PRE: &str = "evo_attention_bwd_pre";
pub const ENTRY_BWD: &str = "evo_attention_bwd";
pub const ENTRY_BWD_DQ: &str = "evo_attention_bwd_dq";
pub const ENTRY_BWD_POST: &str = "evo_attention_bwd_post";

/// What a backward module declares in `evo_bwd_geometry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwdGeometry {
    /// Keys per CTA of the main kernel.
    pub block_n: u32,
    pub main_threads: u32,
    pub main_smem: u32,
    /// Query rows per CTA of the dQ pass.
    pub block_m: u32,
    /// 0: no dQ pass.
    pub dq_threads: u32,
    pub dq_smem: u32,
    pub pre_rows: u32,
    pub pre_threads: u32,
    pub post_rows: u32,
    /// 0: no postprocess.
    pub post_threads: u32,
}

impl BwdGeometry {
    /// Reads the ten ints, refusing what no launch could take (a zero block where a
    /// kernel is launched, more than 1024 threads, shared memory past the device's).
    pub fn from_ints(v: &[i32], max_smem_optin: u32) -> Result<BwdGeometry, String> {
        if v.len() < 10 {
            return Err(format!(
                "`{BWD_GEOMETRY_SYMBOL}` has {} ints, expected 10",
                v.len()
            ));
        }
        if let Some(i) = v.iter().take(10).position(|&x| x < 0) {
            return Err(format!(
                "`{BWD_GEOMETRY_SYMBOL}[{i}]` is {}, expected 0 or more",
                v[i]
            ));
        }
        let u = |i: usize| v[i] as u32;
        let g = BwdGeometry {
            block_n: u(0),
            main_threads: u(1),
            main_smem: u(2),
            block_m: u(3),
            dq_threads: u(4),
            dq_smem: u(5),
            pre_rows: u(6),
            pre_threads: u(7),
            post_rows: u(8),
            post_threads: u(9),
        };
        let launched = [
            ("main kernel", g.block_n, g.main_threads, g.main_smem, true),
            (
                "dQ pass",
                g.block_m,
                g.dq_threads,
                g.dq_smem,
                g.dq_threads > 0,
            ),
            ("preprocess", g.pre_rows, g.pre_threads, 0, true),
            (
                "postprocess",
                g.post_rows,
                g.post_threads,
                0,
                g.post_threads > 0,
            ),
        ];
        for (what, rows, threads, smem, used) in launched {
            if !used {
                continue;
            }
            if rows == 0 || threads == 0 || threads > 1024 {
                return Err(format!(
                    "`{BWD_GEOMETRY_SYMBOL}`: the {what} has {rows} rows per block and \
                     {threads} threads; a launched kernel needs rows > 0 and 1 to 1024 threads"
                ));
            }
            if smem > max_smem_optin {
                return Err(format!(
                    "`{BWD_GEOMETRY_SYMBOL}`: the {what} asks for {smem} bytes of shared \
                     memory; this device allows {max_smem_optin}"
                ));
            }
        }
        Ok(g)
    }
}

/// Floats of a backward call's workspace: `B*H*Lq*(D+1)` (kernels/ABI.md).
pub fn bwd_workspace_len(p: &Problem) -> usize {
    (p.batch * p.heads) as usize * p.q_len as usize * (p.head_dim.get() as usize + 1)
}

/// The device addresses of one backward call.
#[derive(Debug, Clone, Copy, Default)]
pub struct BwdBuffers {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    pub d_o: u64,
    pub lse: u64,
    pub dq: u64,
    pub dk: u64,
    pub dv: u64,
    pub ws: u64,
}

/// The arguments every backward kernel takes, in the signature's order.
#[derive(Clone, Copy)]
pub struct BwdArgs {
    pub buffers: BwdBuffers,
    pub b: i32,
    pub h: i32,
    pub lq: i32,
    pub lk: i32,
    pub causal: i32,
    pub scale: f32,
    pub shape: ShapeArgs,
}

impl BwdArgs {
    pub fn of(p: &Problem, buffers: BwdBuffers) -> BwdArgs {
        BwdArgs {
            buffers,
            b: p.batch as i32,
            h: p.heads as i32,
            lq: p.q_len as i32,
            lk: p.kv_len as i32,
            causal: p.causal as i32,
            scale: 1.0f32 / (p.head_dim.get() as f32).sqrt(),
            shape: ShapeArgs::of(p),
        }
    }
}

fn param<T>(x: &mut T) -> *mut c_void {
    x as *mut T as *mut c_void
}

impl Args for BwdArgs {
    fn params(&mut self) -> Vec<*mut c_void> {
        let b = &mut self.buffers;
        vec![
            param(&mut b.q),
            param(&mut b.k),
            param(&mut b.v),
            param(&mut b.o),
            param(&mut b.d_o),
            param(&mut b.lse),
            param(&mut b.dq),
            param(&mut b.dk),
            param(&mut b.dv),
            param(&mut b.ws),
            param(&mut self.b),
            param(&mut self.h),
            param(&mut self.lq),
            param(&mut self.lk),
            param(&mut self.causal),
            param(&mut self.scale),
            param(&mut self.shape.kv_heads),
            param(&mut self.shape.diag),
            param(&mut self.shape.window_left),
            param(&mut self.shape.window_right),
        ]
    }
}

/// One backward kernel design in a context.
pub struct BackwardModule {
    name: String,
    _module: Arc<CudaModule>,
    pre: CudaFunction,
    main: CudaFunction,
    dq: Option<CudaFunction>,
    post: Option<CudaFunction>,
    geometry: BwdGeometry,
    deterministic: bool,
}

impl BackwardModule {
    /// Loads `image` (a module of the backward ABI) into `ctx`, reads its geometry and
    /// checks it against the device; raises the main kernel's and the dQ pass's dynamic
    /// shared memory above 48 KiB.
    pub fn load(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        name: &str,
        image: &ModuleImage,
    ) -> Result<BackwardModule, RuntimeError> {
        let module = load_image(ctx, name, image)?;
        let abi_err = |m: String| RuntimeError::Abi(format!("{name}: {m}"));
        match declared_ints(&module, stream, image, name, PASS_SYMBOL, 1)? {
            Some(v) if v[0] == 1 => {}
            other => {
                return Err(abi_err(format!(
                    "`{PASS_SYMBOL}` is {}; a backward module declares \
                     `extern \"C\" __constant__ int {PASS_SYMBOL}[1] = {{1}};` \
                     (kernels/ABI.md, \"The backward ABI\")",
                    other.map_or("not declared".to_string(), |v| format!("{{{}}}", v[0]))
                )))
            }
        }
        let max_smem_optin = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(driver("reading the shared-memory limit"))?
            as u32;
        let geometry = match declared_ints(&module, stream, image, name, BWD_GEOMETRY_SYMBOL, 10)? {
            Some(v) => BwdGeometry::from_ints(&v, max_smem_optin).map_err(abi_err)?,
            None => {
                return Err(abi_err(format!(
                    "no `{BWD_GEOMETRY_SYMBOL}`; declare `extern \"C\" __constant__ int \
                     {BWD_GEOMETRY_SYMBOL}[10]` (kernels/ABI.md, \"The backward ABI\")"
                )))
            }
        };
        let deterministic = matches!(
            declared_ints(&module, stream, image, name, DETERMINISTIC_SYMBOL, 1)?,
            Some(v) if v[0] == 1
        );
        let pre = function(&module, name, ENTRY_BWD_PRE)?;
        let main = function(&module, name, ENTRY_BWD)?;
        let dq = (geometry.dq_threads > 0)
            .then(|| function(&module, name, ENTRY_BWD_DQ))
            .transpose()?;
        let post = (geometry.post_threads > 0)
            .then(|| function(&module, name, ENTRY_BWD_POST))
            .transpose()?;
        for (f, smem, entry) in [
            (Some(&main), geometry.main_smem, ENTRY_BWD),
            (dq.as_ref(), geometry.dq_smem, ENTRY_BWD_DQ),
        ] {
            if let (Some(f), true) = (f, smem > 48 * 1024) {
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(driver(format!(
                    "raising the dynamic shared memory of {entry} of {name} to {smem} bytes"
                )))?;
            }
        }
        Ok(BackwardModule {
            name: name.to_string(),
            _module: module,
            pre,
            main,
            dq,
            post,
            geometry,
            deterministic,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn geometry(&self) -> BwdGeometry {
        self.geometry
    }

    /// True when the module declares `evo_deterministic = {1}`: GREEN then holds it to
    /// bitwise-equal results on equal inputs.
    pub fn deterministic(&self) -> bool {
        self.deterministic
    }

    /// Every backward module states every problem of the second ABI.
    pub fn states(&self, p: &Problem) -> Result<(), RuntimeError> {
        p.validate()
            .map_err(|m| RuntimeError::InvalidArgument(format!("{}: {m}", self.name)))
    }

    /// The kernels this call launches, in order, with their launch shapes.
    pub fn launches(&self, p: &Problem) -> Vec<(&CudaFunction, LaunchConfig, &'static str)> {
        let g = self.geometry;
        let (bh, bhkv) = (p.batch * p.heads, p.batch * p.kv_heads());
        let cfg = |rows: u32, of: u32, heads: u32, threads: u32, smem: u32| LaunchConfig {
            grid_dim: (of.div_ceil(rows), heads, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        let mut out = vec![
            (
                &self.pre,
                cfg(g.pre_rows, p.q_len, bh, g.pre_threads, 0),
                ENTRY_BWD_PRE,
            ),
            (
                &self.main,
                cfg(g.block_n, p.kv_len, bhkv, g.main_threads, g.main_smem),
                ENTRY_BWD,
            ),
        ];
        if let Some(f) = &self.dq {
            out.push((
                f,
                cfg(g.block_m, p.q_len, bh, g.dq_threads, g.dq_smem),
                ENTRY_BWD_DQ,
            ));
        }
        if let Some(f) = &self.post {
            out.push((
                f,
                cfg(g.post_rows, p.q_len, bh, g.post_threads, 0),
                ENTRY_BWD_POST,
            ));
        }
        out
    }

    /// Enqueues one backward call on `stream`.
    ///
    /// # Safety
    /// `b` holds device buffers of this module's context sized for `p` (Q, O, dO, dQ:
    /// `B*H*Lq*D` elements; K, V, dK, dV: `B*Hkv*Lk*D`; lse: `B*H*Lq` floats; ws:
    /// [`bwd_workspace_len`] floats), and `stream` is a live stream of that context,
    /// current on this thread.
    pub unsafe fn backward(
        &self,
        stream: CUstream,
        p: &Problem,
        b: &BwdBuffers,
    ) -> Result<(), RuntimeError> {
        self.states(p)?;
        let null = [
            ("Q", b.q),
            ("K", b.k),
            ("V", b.v),
            ("O", b.o),
            ("dO", b.d_o),
            ("lse", b.lse),
            ("dQ", b.dq),
            ("dK", b.dk),
            ("dV", b.dv),
            ("the workspace", b.ws),
        ];
        if let Some((what, _)) = null.iter().find(|(_, ptr)| *ptr == 0) {
            return Err(RuntimeError::InvalidArgument(format!(
                "{}: {what} is a null pointer; every backward buffer is required",
                self.name
            )));
        }
        let mut args = BwdArgs::of(p, *b);
        for (f, cfg, entry) in self.launches(p) {
            // SAFETY: the caller's buffers for `p`; the grid comes from a geometry checked
            // against the device when the module loaded; `args` is the ABI's signature.
            unsafe {
                launch(
                    stream,
                    f,
                    cfg,
                    &mut args,
                    &format!("{entry} of {}", self.name),
                )?
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_geometry_refuses_what_no_launch_takes() {
        let ok = [128, 256, 90_000, 64, 0, 0, 4, 128, 16, 128];
        let g = BwdGeometry::from_ints(&ok, 232_448).unwrap();
        assert_eq!((g.block_n, g.dq_threads, g.post_threads), (128, 0, 128));
        let e = BwdGeometry::from_ints(&ok, 80_000).unwrap_err();
        assert!(e.contains("90000 bytes"), "{e}");
        let mut zero = ok;
        zero[0] = 0;
        assert!(BwdGeometry::from_ints(&zero, 232_448)
            .unwrap_err()
            .contains("main kernel"));
        let mut neg = ok;
        neg[5] = -1;
        assert!(BwdGeometry::from_ints(&neg, 232_448)
            .unwrap_err()
            .contains("[5]"));
        // A dQ pass that is not launched may declare anything non-negative.
        let mut no_dq = ok;
        no_dq[3] = 0;
        assert!(BwdGeometry::from_ints(&no_dq, 232_448).is_ok());
        assert!(BwdGeometry::from_ints(&ok[..9], 232_448).is_err());
    }

    #[test]
    fn the_arguments_are_in_the_abi_order() {
        let p: Problem = "2,8,77,131,64,f16,causal=br,kv=2".parse().unwrap();
        let buffers = BwdBuffers {
            q: 1,
            k: 2,
            v: 3,
            o: 4,
            d_o: 5,
            lse: 6,
            dq: 7,
            dk: 8,
            dv: 9,
            ws: 10,
        };
        let mut args = BwdArgs::of(&p, buffers);
        let params = args.params();
        assert_eq!(params.len(), 20);
        // SAFETY: each pointer points into `args`, alive here; the types are the fields'.
        let (ws, lk, scale, hkv, diag) = unsafe {
            (
                *(params[9] as *const u64),
                *(params[13] as *const i32),
                *(params[15] as *const f32),
                *(params[16] as *const i32),
                *(params[17] as *const i32),
            )
        };
        assert_eq!((ws, lk, scale, hkv, diag), (10, 131, 0.125, 2, 54));
        assert_eq!(bwd_workspace_len(&p), 2 * 8 * 77 * 65);
    }
}
