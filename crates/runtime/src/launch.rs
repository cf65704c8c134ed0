//! One ABI call (kernels/ABI.md): the launch shapes of the forward kernel and the
//! combine, the split-KV workspace's size, the arguments as owned values, and the launch
//! itself on any stream, the caller's included.
//!
//! The arguments are plain values ([`FwdArgs`], [`CombineArgs`]) rather than a builder
//! bound to one launch, because the gates hand the same values to graph nodes they
//! re-point every repeat, and the C ABI to a stream it does not own.

use crate::abi::{encode_tensor_map, TensorMaps, ENTRY_COMBINE, ENTRY_FWD, LSE_SYMBOL};
use crate::error::{driver, RuntimeError};
use crate::module::AttentionModule;
use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaFunction, LaunchConfig};
use evo_genome::Problem;
use std::ffi::c_void;

/// The arguments of `evo_attention_fwd` (kernels/ABI.md), in the order of its signature.
#[derive(Clone, Copy)]
pub struct FwdArgs {
    /// Q, K and V's tensor maps (and O's), first, for a kernel that declares them.
    pub maps: Option<TensorMaps>,
    /// Q, K, V, O and the workspace, in the signature's order.
    pub buffers: Buffers,
    pub b: i32,
    pub h: i32,
    pub lq: i32,
    pub lk: i32,
    pub causal: i32,
    pub scale: f32,
    /// The second ABI's arguments; none for a kernel of the first.
    pub shape: Option<ShapeArgs>,
    /// The `lse` pointer, last, for a kernel that declares `evo_lse` (0: not asked);
    /// none for one that does not (it takes no such argument).
    pub lse: Option<u64>,
}

/// The arguments the second ABI adds after `scale` (kernels/ABI.md): K/V heads, the
/// diagonal's offset and the window's bounds (-1: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeArgs {
    pub kv_heads: i32,
    pub diag: i32,
    pub window_left: i32,
    pub window_right: i32,
}

impl ShapeArgs {
    pub fn of(p: &Problem) -> ShapeArgs {
        let m = p.mask_args();
        ShapeArgs {
            kv_heads: p.kv_heads() as i32,
            diag: m.diag,
            window_left: m.window_left,
            window_right: m.window_right,
        }
    }
}

/// A kernel's argument values, as `cuLaunchKernel` and kernel graph nodes take them:
/// an array of pointers to each value, in the order of the signature.
pub trait Args {
    fn params(&mut self) -> Vec<*mut c_void>;
}

fn param<T>(x: &mut T) -> *mut c_void {
    x as *mut T as *mut c_void
}

impl Args for FwdArgs {
    fn params(&mut self) -> Vec<*mut c_void> {
        let mut out = Vec::with_capacity(19);
        if let Some(maps) = &mut self.maps {
            out.extend([param(&mut maps.q), param(&mut maps.k), param(&mut maps.v)]);
            if let Some(o) = &mut maps.o {
                out.push(param(o));
            }
        }
        out.extend([
            param(&mut self.buffers.q),
            param(&mut self.buffers.k),
            param(&mut self.buffers.v),
            param(&mut self.buffers.o),
            param(&mut self.buffers.ws_o),
            param(&mut self.buffers.ws_lse),
            param(&mut self.b),
            param(&mut self.h),
            param(&mut self.lq),
            param(&mut self.lk),
            param(&mut self.causal),
            param(&mut self.scale),
        ]);
        if let Some(shape) = &mut self.shape {
            out.extend([
                param(&mut shape.kv_heads),
                param(&mut shape.diag),
                param(&mut shape.window_left),
                param(&mut shape.window_right),
            ]);
        }
        if let Some(lse) = &mut self.lse {
            out.push(param(lse));
        }
        out
    }
}

/// The `lse` argument of a call (kernels/ABI.md, "The log-sum-exp output"): for a
/// kernel that declares `evo_lse` (`takes`), the pointer asked for or null; for one that
/// does not, no argument, and asking it for the lse is an error naming `kernel`.
pub fn lse_arg(kernel: &str, takes: bool, asked: Option<u64>) -> Result<Option<u64>, RuntimeError> {
    match (takes, asked) {
        (true, asked) => Ok(Some(asked.unwrap_or(0))),
        (false, None) => Ok(None),
        (false, Some(_)) => Err(RuntimeError::Unsupported(format!(
            "{kernel} does not declare `{LSE_SYMBOL}`, so it cannot write the forward's \
             log-sum-exp; a kernel that can declares `extern \"C\" __constant__ int \
             {LSE_SYMBOL}[1] = {{1}};` and takes `float* lse` last (kernels/ABI.md)"
        ))),
    }
}

/// The arguments of `evo_attention_combine`.
#[derive(Clone, Copy)]
pub struct CombineArgs {
    pub ws_o: u64,
    pub ws_lse: u64,
    pub o: u64,
    pub b: i32,
    pub h: i32,
    pub lq: i32,
    pub splits: i32,
    /// As [`FwdArgs::lse`]: with split-KV the combine writes the lse.
    pub lse: Option<u64>,
}

impl Args for CombineArgs {
    fn params(&mut self) -> Vec<*mut c_void> {
        let mut out = vec![
            param(&mut self.ws_o),
            param(&mut self.ws_lse),
            param(&mut self.o),
            param(&mut self.b),
            param(&mut self.h),
            param(&mut self.lq),
            param(&mut self.splits),
        ];
        if let Some(lse) = &mut self.lse {
            out.push(param(lse));
        }
        out
    }
}

/// Enqueues `f` with `args` on `stream` (a raw handle: the caller's own stream, or a
/// cudarc stream's `cu_stream()`; the context must be current on this thread).
///
/// # Safety
/// `args` must be the values of `f`'s parameters, in order and of their types (for the
/// ABI's kernels: kernels/ABI.md, with device pointers sized for the launch's problem),
/// and `cfg` a launch shape the device accepts for `f`.
pub unsafe fn launch(
    stream: CUstream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    args: &mut dyn Args,
    what: &str,
) -> Result<(), RuntimeError> {
    let mut params = args.params();
    // SAFETY: the caller's; every pointer of `params` points into `args`, alive until
    // the call returns (the driver copies the values).
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            cfg.grid_dim,
            cfg.block_dim,
            cfg.shared_mem_bytes,
            stream,
            &mut params,
        )
    }
    .map_err(driver(format!("launching {what}")))
}

/// Floats of the split-KV workspace's two halves for `splits` splits of `p`:
/// `ws_o[split][B*H][Lq][D]` and `ws_lse[split][B*H][Lq]` (kernels/ABI.md, "Split-KV").
pub fn workspace_len(p: &Problem, splits: u32) -> (usize, usize) {
    let rows = splits as usize * (p.batch * p.heads) as usize * p.q_len as usize;
    (rows * p.head_dim.get() as usize, rows)
}

/// The device addresses of one call: the caller's tensors and, for a kernel that splits
/// the keys, the workspace (else zeros).
#[derive(Debug, Clone, Copy, Default)]
pub struct Buffers {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    pub ws_o: u64,
    pub ws_lse: u64,
}

impl AttentionModule {
    /// The launch shapes of the forward kernel and the combine.
    pub fn configs(&self, p: &Problem) -> (LaunchConfig, LaunchConfig) {
        let g = self.geometry();
        let p = &self.launch_view(p);
        (
            LaunchConfig {
                grid_dim: g.fwd_grid(p),
                block_dim: (g.threads, 1, 1),
                shared_mem_bytes: g.smem_bytes,
            },
            LaunchConfig {
                grid_dim: (
                    p.q_len.div_ceil(g.combine_rows.max(1)),
                    p.batch * p.heads,
                    1,
                ),
                block_dim: (g.combine_threads.max(1), 1, 1),
                shared_mem_bytes: 0,
            },
        )
    }

    /// The workspace this kernel needs for `p` (floats of `ws_o` and `ws_lse`); none
    /// without a split, or when the kernel merges its splits in a cluster.
    pub fn workspace_len(&self, p: &Problem) -> Option<(usize, usize)> {
        let g = self.geometry();
        g.has_combine()
            .then(|| workspace_len(&self.launch_view(p), g.split_kv))
    }

    /// Encodes Q, K and V's tensor maps when the kernel declares them, and O's when it
    /// stores O by TMA (Q's and O's as the launch sees them: a packing kernel's heads are
    /// K/V heads).
    pub fn encode_maps(
        &self,
        p: &Problem,
        b: &Buffers,
    ) -> Result<Option<TensorMaps>, RuntimeError> {
        let Some(spec) = self.tensor_map_spec() else {
            return Ok(None);
        };
        let view = self.launch_view(p);
        let (q, kv) = ((view.q_len, view.heads), (p.kv_len, p.kv_heads()));
        Ok(Some(TensorMaps {
            q: encode_tensor_map(b.q, p, q, spec.q_rows, &spec)?,
            k: encode_tensor_map(b.k, p, kv, spec.kv_rows, &spec)?,
            v: encode_tensor_map(b.v, p, kv, spec.kv_rows, &spec)?,
            o: spec
                .o_rows
                .map(|rows| encode_tensor_map(b.o, p, q, rows, &spec))
                .transpose()?,
        }))
    }

    /// The arguments of the call on `b` (with `maps` from [`Self::encode_maps`] of the
    /// same buffers when the kernel asks for tensor maps), writing the forward's
    /// log-sum-exp to `lse` (fp32 `[B, H, Lq]`) when it is some; a kernel that does not
    /// declare `evo_lse` refuses that.
    pub fn args(
        &self,
        p: &Problem,
        b: &Buffers,
        maps: Option<TensorMaps>,
        lse: Option<u64>,
    ) -> Result<(FwdArgs, CombineArgs), RuntimeError> {
        self.states(p)?;
        let lse = lse_arg(self.name(), self.writes_lse(), lse)?;
        // The combine runs over the launch's rows (a packing kernel's are K/V heads').
        let view = self.launch_view(p);
        if let Some(spec) = self.tensor_map_spec() {
            if maps.is_none_or(|m| m.o.is_some() != spec.o_rows.is_some()) {
                return Err(RuntimeError::Abi(format!(
                    "{}: tensor maps not encoded (or O's missing)",
                    self.name()
                )));
            }
        }
        let (bh, h, lq, lk) = (
            p.batch as i32,
            p.heads as i32,
            p.q_len as i32,
            p.kv_len as i32,
        );
        Ok((
            FwdArgs {
                maps,
                buffers: *b,
                b: bh,
                h,
                lq,
                lk,
                causal: p.causal as i32,
                scale: 1.0f32 / (p.head_dim.get() as f32).sqrt(),
                shape: (self.abi() >= 2).then(|| ShapeArgs::of(p)),
                lse,
            },
            CombineArgs {
                ws_o: b.ws_o,
                ws_lse: b.ws_lse,
                o: b.o,
                b: bh,
                h: view.heads as i32,
                lq: view.q_len as i32,
                splits: self.geometry().split_kv as i32,
                lse,
            },
        ))
    }

    /// Enqueues one call (forward, then combine when split) on `stream`.
    ///
    /// # Safety
    /// `fwd` and `combine` come from [`Self::args`] for `p`, on device buffers of this
    /// module's context sized for `p` (and its workspace, [`Self::workspace_len`]), and
    /// `stream` is a live stream of that context, current on this thread.
    pub unsafe fn enqueue(
        &self,
        stream: CUstream,
        p: &Problem,
        fwd: &mut FwdArgs,
        combine: &mut CombineArgs,
    ) -> Result<(), RuntimeError> {
        let (cfg_fwd, cfg_combine) = self.configs(p);
        // SAFETY: the caller's (arguments for `p`); the grid is `configs`', from a
        // geometry checked against the device when the module loaded.
        unsafe {
            launch(
                stream,
                self.fwd(),
                cfg_fwd,
                fwd,
                &format!("{ENTRY_FWD} of {}", self.name()),
            )?;
            if let Some(f) = self.combine() {
                launch(
                    stream,
                    f,
                    cfg_combine,
                    combine,
                    &format!("{ENTRY_COMBINE} of {}", self.name()),
                )?;
            }
        }
        Ok(())
    }

    /// Encodes the maps, builds the arguments and enqueues one call on `b`.
    ///
    /// # Safety
    /// As [`Self::enqueue`]: `b` holds device buffers of this module's context sized
    /// for `p` (the workspace too when [`Self::workspace_len`] is some), and `stream` is
    /// a live stream of that context, current on this thread.
    pub unsafe fn forward(
        &self,
        stream: CUstream,
        p: &Problem,
        b: &Buffers,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller's.
        unsafe { self.forward_with_lse(stream, p, b, None) }
    }

    /// [`Self::forward`], also writing the forward's log-sum-exp (fp32 natural log,
    /// `[B, H, Lq]`, +inf for a row that sees no key) to the device buffer `lse` when it
    /// is some: a kernel that does not declare `evo_lse` refuses it.
    ///
    /// # Safety
    /// As [`Self::forward`]; `lse`, when some, is a device buffer of `B·H·Lq` floats of
    /// the same context.
    pub unsafe fn forward_with_lse(
        &self,
        stream: CUstream,
        p: &Problem,
        b: &Buffers,
        lse: Option<u64>,
    ) -> Result<(), RuntimeError> {
        if self.workspace_len(p).is_some() && (b.ws_o == 0 || b.ws_lse == 0) {
            return Err(RuntimeError::InvalidArgument(format!(
                "{} splits the keys {} ways and needs a workspace; none was given",
                self.name(),
                self.geometry().split_kv
            )));
        }
        let maps = self.encode_maps(p, b)?;
        let (mut fwd, mut combine) = self.args(p, b, maps, lse)?;
        // SAFETY: the caller's; the arguments are `args`' for `p` on `b`.
        unsafe { self.enqueue(stream, p, &mut fwd, &mut combine) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::TensorMapArg;

    #[test]
    fn the_workspace_is_splits_times_rows_times_d_plus_one() {
        let p: Problem = "2,16,77,1000,128,bf16".parse().unwrap();
        let (o, lse) = workspace_len(&p, 4);
        assert_eq!(lse, 4 * 32 * 77);
        assert_eq!(o + lse, 4 * 32 * 77 * (128 + 1));
    }

    #[test]
    fn the_forward_arguments_are_in_the_abi_order() {
        let mut args = FwdArgs {
            maps: None,
            buffers: Buffers {
                q: 1,
                k: 2,
                v: 3,
                o: 4,
                ws_o: 5,
                ws_lse: 6,
            },
            b: 7,
            h: 8,
            lq: 9,
            lk: 10,
            causal: 1,
            scale: 0.125,
            shape: None,
            lse: None,
        };
        let params = args.params();
        assert_eq!(params.len(), 12);
        // SAFETY: each pointer points into `args`, alive here; the types are the fields'.
        let (o, lk) = unsafe { (*(params[3] as *const u64), *(params[9] as *const i32)) };
        assert_eq!((o, lk), (4, 10));
        let zero = TensorMapArg([0; 16]);
        let maps = TensorMaps {
            q: zero,
            k: zero,
            v: zero,
            o: None,
        };
        let mut with_maps = FwdArgs {
            maps: Some(maps),
            ..args
        };
        assert_eq!(with_maps.params().len(), 15);
        // O's map follows V's, before the pointers.
        let mut with_o = FwdArgs {
            maps: Some(TensorMaps {
                o: Some(TensorMapArg([7; 16])),
                ..maps
            }),
            ..args
        };
        let params = with_o.params();
        assert_eq!(params.len(), 16);
        // SAFETY: as above.
        let (o_map, q) = unsafe {
            (
                (*(params[3] as *const [u64; 16]))[0],
                *(params[4] as *const u64),
            )
        };
        assert_eq!((o_map, q), (7, 1));
        let mut second = FwdArgs {
            shape: Some(ShapeArgs {
                kv_heads: 2,
                diag: -3,
                window_left: 64,
                window_right: -1,
            }),
            ..args
        };
        let params = second.params();
        assert_eq!(params.len(), 16);
        // SAFETY: as above.
        let (scale, hkv, diag) = unsafe {
            (
                *(params[11] as *const f32),
                *(params[12] as *const i32),
                *(params[13] as *const i32),
            )
        };
        assert_eq!((scale, hkv, diag), (0.125, 2, -3));
    }

    #[test]
    fn the_lse_pointer_is_last_and_only_for_a_kernel_that_declares_evo_lse() {
        let buffers = Buffers {
            o: 4,
            ..Buffers::default()
        };
        let shape = ShapeArgs {
            kv_heads: 2,
            diag: 0,
            window_left: -1,
            window_right: 5,
        };
        let fwd = |lse| FwdArgs {
            maps: None,
            buffers,
            b: 1,
            h: 2,
            lq: 3,
            lk: 4,
            causal: 0,
            scale: 0.125,
            shape: Some(shape),
            lse,
        };
        // A kernel without evo_lse: the second ABI's 16 arguments, window_right last.
        let mut without = fwd(lse_arg("k.cu", false, None).unwrap());
        let params = without.params();
        assert_eq!(params.len(), 16);
        // SAFETY: each pointer points into `without`, alive here; the types are the fields'.
        assert_eq!(unsafe { *(params[15] as *const i32) }, 5);
        // Declared and not asked: a null pointer after window_right.
        let mut null = fwd(lse_arg("k.cu", true, None).unwrap());
        let params = null.params();
        assert_eq!(params.len(), 17);
        // SAFETY: as above.
        assert_eq!(unsafe { *(params[16] as *const u64) }, 0);
        // Asked: the buffer's address, after the tensor maps' usual arguments too.
        let zero = TensorMapArg([0; 16]);
        let mut asked = FwdArgs {
            maps: Some(TensorMaps {
                q: zero,
                k: zero,
                v: zero,
                o: Some(zero),
            }),
            ..fwd(lse_arg("k.cu", true, Some(0xABC0)).unwrap())
        };
        let params = asked.params();
        assert_eq!(params.len(), 21);
        // SAFETY: as above.
        assert_eq!(unsafe { *(params[20] as *const u64) }, 0xABC0);
        // The combine takes it after splits.
        let combine = |lse| CombineArgs {
            ws_o: 1,
            ws_lse: 2,
            o: 3,
            b: 1,
            h: 2,
            lq: 3,
            splits: 4,
            lse,
        };
        assert_eq!(combine(None).params().len(), 7);
        let mut c = combine(Some(0xDEF0));
        let params = c.params();
        assert_eq!(params.len(), 8);
        // SAFETY: as above.
        let (splits, lse) = unsafe { (*(params[6] as *const i32), *(params[7] as *const u64)) };
        assert_eq!((splits, lse), (4, 0xDEF0));
        // Asking a kernel that does not declare evo_lse is an error that says so.
        let why = lse_arg("k.cu", false, Some(0xABC0))
            .unwrap_err()
            .to_string();
        assert!(why.contains("k.cu does not declare `evo_lse`"), "{why}");
    }

    #[test]
    fn the_second_abi_takes_kv_heads_and_the_mask() {
        let p: Problem = "1,32,77,1000,128,f16,causal=br,kv=8,window=100:"
            .parse()
            .unwrap();
        assert_eq!(
            ShapeArgs::of(&p),
            ShapeArgs {
                kv_heads: 8,
                diag: 923,
                window_left: 100,
                window_right: -1
            }
        );
    }
}
