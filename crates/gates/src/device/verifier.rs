//! The device side of the gates' judgement (`kernels/verify.cu`): the input generator,
//! an fp32 reference, the row-by-row comparison and the guard check, on the device's
//! stream. One per device, shared by every kernel loaded on it.
//!
//! The reference is cuBLAS's fp32 GEMM (`CUBLAS_COMPUTE_32F_PEDANTIC`: no TF32 or
//! other reduced-precision path, whatever the environment asks for) around a plain
//! row softmax: S = Q·Kᵀ, P = softmax(S·scale + mask), O = P·V, on fp32 copies of the
//! inputs drawn again from the launch's seed (never read back from the kernel's
//! buffers, which it could have written). S is computed a group of heads at a time,
//! at most [`S_BYTES`] of it.

use super::blas::Products;
use super::{alloc, driver, ptr};
use crate::error::GateError;
use crate::philox::{value_scale, Tensor};
use crate::verify::RowStat;
use cudarc::cublas::{result as blas_result, sys as blas_sys, CudaBlas};
use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
    ValidAsZeroBits,
};
use evo_genome::{Dtype, Problem};
use std::sync::{Arc, Mutex};

/// The most scores the reference holds at once (fp32 bytes).
pub const S_BYTES: usize = 1 << 30;

// SAFETY: plain `#[repr(C)]` data (the layout of `RowStat` in kernels/verify.cu); every
// bit pattern is a valid value.
unsafe impl DeviceRepr for RowStat {}
// SAFETY: all fields are numbers, for which zero bits are a valid value.
unsafe impl ValidAsZeroBits for RowStat {}

/// One tensor for `evo_draw` (the layout of `DrawJob` in kernels/verify.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DrawJob {
    pub seed: u64,
    pub n: u64,
    /// 16-bit destination, f32 destination, 16-bit buffer to compare with (0 = none).
    pub dst16: u64,
    pub dst32: u64,
    pub cmp16: u64,
    /// Where differing elements are counted (needed with `cmp16`).
    pub mismatches: u64,
    pub scale: f32,
    pub tensor: u32,
}

// SAFETY: plain `#[repr(C)]` data read by `evo_draw`.
unsafe impl DeviceRepr for DrawJob {}
// SAFETY: all fields are numbers.
unsafe impl ValidAsZeroBits for DrawJob {}

impl DrawJob {
    /// The jobs that draw Q, K and V of `problem` from `seed` into 16-bit buffers.
    pub fn inputs16(problem: &Problem, seed: u64, q_gain: f32, dst: [u64; 3]) -> [DrawJob; 3] {
        let n = [problem.q_elems(), problem.kv_elems(), problem.kv_elems()];
        let gain = [q_gain, 1.0, 1.0];
        let tensor = [Tensor::Q, Tensor::K, Tensor::V];
        std::array::from_fn(|t| DrawJob {
            seed,
            n: n[t] as u64,
            dst16: dst[t],
            scale: value_scale(gain[t]),
            tensor: tensor[t] as u32,
            ..DrawJob::default()
        })
    }
}

/// The buffers of the reference for one problem.
struct Scratch {
    problem: Problem,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    o: CudaSlice<f32>,
    s: CudaSlice<f32>,
    /// Heads whose scores fit in `s` at once.
    heads_per_pass: usize,
    rows: CudaSlice<RowStat>,
    /// [0]: elements of the inputs that differed from the draw.
    counter: CudaSlice<u32>,
}

pub(crate) struct Verifier {
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    draw_fn: CudaFunction,
    softmax_fn: CudaFunction,
    compare_fn: CudaFunction,
    gather_fn: CudaFunction,
    guards_fn: CudaFunction,
    read_over_fn: CudaFunction,
    blas: CudaBlas,
    jobs: Mutex<Option<CudaSlice<DrawJob>>>,
    scratch: Mutex<Option<Scratch>>,
}

fn function(module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction, GateError> {
    module.load_function(name).map_err(|e| {
        GateError::Reference(format!(
            "kernels/verify.cu has no `{name}` ({e}); the verifier was built from another source"
        ))
    })
}

fn blas_err(during: &str) -> impl FnOnce(blas_result::CublasError) -> GateError {
    let during = during.to_string();
    move |e| GateError::Blas {
        during,
        message: format!("{e:?}"),
    }
}

impl Verifier {
    pub fn new(stream: Arc<CudaStream>, module: Arc<CudaModule>) -> Result<Verifier, GateError> {
        // SAFETY: only tries to dlopen libcublas by its usual names.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(GateError::Blas {
                during: "loading libcublas (the device reference)".into(),
                message: "libcublas was not found by the dynamic loader; add the CUDA \
                          toolkit's lib64 to LD_LIBRARY_PATH"
                    .into(),
            });
        }
        let blas = CudaBlas::new(stream.clone()).map_err(blas_err("creating a cuBLAS handle"))?;
        Ok(Verifier {
            draw_fn: function(&module, "evo_draw")?,
            softmax_fn: function(&module, "evo_reference_softmax")?,
            compare_fn: function(&module, "evo_compare_rows")?,
            gather_fn: function(&module, "evo_gather_rows")?,
            guards_fn: function(&module, "evo_check_guards")?,
            read_over_fn: function(&module, "evo_read_over")?,
            blas,
            stream,
            _module: module,
            jobs: Mutex::new(None),
            scratch: Mutex::new(None),
        })
    }

    /// Draws every job on the stream (one launch).
    pub fn draw(&self, dtype: Dtype, jobs: &[DrawJob]) -> Result<(), GateError> {
        if jobs.is_empty() {
            return Ok(());
        }
        let mut table = self.jobs.lock().expect("the draw table");
        if table.as_ref().is_none_or(|t| t.len() < jobs.len()) {
            *table = Some(alloc::<DrawJob>(
                &self.stream,
                jobs.len().max(192),
                "the draw table",
            )?);
        }
        let table = table.as_mut().expect("allocated above");
        self.stream
            .memcpy_htod(jobs, &mut table.slice_mut(0..jobs.len()))
            .map_err(driver("uploading the draw table"))?;
        let most = jobs.iter().map(|j| j.n.div_ceil(2)).max().unwrap_or(0);
        let cfg = LaunchConfig {
            grid_dim: (
                most.div_ceil(256).clamp(1, 1024) as u32,
                jobs.len() as u32,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let bf16 = i32::from(dtype == Dtype::Bf16);
        let mut args = self.stream.launch_builder(&self.draw_fn);
        args.arg(&*table).arg(&bf16);
        // SAFETY: `evo_draw(const DrawJob*, int)`; every job's pointers are live device
        // buffers of at least `n` elements (or 0), grid y = the number of jobs.
        unsafe { args.launch(cfg) }.map_err(driver("drawing inputs on the device"))?;
        Ok(())
    }

    fn ensure(&self, scratch: &mut Option<Scratch>, p: &Problem) -> Result<(), GateError> {
        if scratch.as_ref().is_some_and(|s| s.problem == *p) {
            return Ok(());
        }
        *scratch = None;
        let st = &self.stream;
        let bh = (p.batch * p.heads) as usize;
        let per_head = p.q_len as usize * p.kv_len as usize;
        let heads_per_pass = (S_BYTES / 4 / per_head.max(1)).clamp(1, bh);
        let rows = bh * p.q_len as usize;
        *scratch = Some(Scratch {
            problem: *p,
            q: alloc(st, p.q_elems(), "the reference's Q")?,
            k: alloc(st, p.kv_elems(), "the reference's K")?,
            v: alloc(st, p.kv_elems(), "the reference's V")?,
            o: alloc(st, p.q_elems(), "the reference's O")?,
            s: alloc(st, heads_per_pass * per_head, "the reference's scores")?,
            heads_per_pass,
            rows: alloc(st, rows, "the row comparison")?,
            counter: alloc(st, 1, "the input check's counter")?,
        });
        Ok(())
    }

    /// Computes the fp32 reference of the inputs drawn from `seed` (and `q_gain`); when
    /// `inputs` names the 16-bit Q, K, V a kernel just ran on, also counts their
    /// elements that no longer hold the draw.
    pub fn reference(
        &self,
        p: &Problem,
        seed: u64,
        q_gain: f32,
        inputs: Option<[u64; 3]>,
    ) -> Result<Option<u64>, GateError> {
        let mut guard = self.scratch.lock().expect("the reference's scratch");
        self.ensure(&mut guard, p)?;
        let sc = guard.as_mut().expect("ensured above");
        let st = &self.stream;
        st.memset_zeros(&mut sc.counter)
            .map_err(driver("clearing the input check's counter"))?;
        let counter = ptr(&sc.counter, st);
        let mut jobs = DrawJob::inputs16(p, seed, q_gain, [0; 3]);
        for (job, (dst, cmp)) in jobs.iter_mut().zip([
            (ptr(&sc.q, st), inputs.map(|i| i[0])),
            (ptr(&sc.k, st), inputs.map(|i| i[1])),
            (ptr(&sc.v, st), inputs.map(|i| i[2])),
        ]) {
            job.dst32 = dst;
            job.cmp16 = cmp.unwrap_or(0);
            job.mismatches = counter;
        }
        self.draw(p.dtype, &jobs)?;

        let (lq, lk, d) = (p.q_len as i32, p.kv_len as i32, p.head_dim.get() as i32);
        let bh = (p.batch * p.heads) as usize;
        let (pq, pk, pv, po, ps) = (
            ptr(&sc.q, st),
            ptr(&sc.k, st),
            ptr(&sc.v, st),
            ptr(&sc.o, st),
            ptr(&sc.s, st),
        );
        let (q_head, kv_head) = ((lq as u64) * (d as u64) * 4, (lk as u64) * (d as u64) * 4);
        let group = p.group() as usize;
        let mut h0 = 0;
        while h0 < bh {
            // Grouped-query attention: a pass stays within one group, whose query heads
            // all read one K/V head (cuBLAS's batch stride 0 for K and V).
            let n = if group > 1 {
                sc.heads_per_pass.min(group - h0 % group)
            } else {
                sc.heads_per_pass.min(bh - h0)
            };
            let kv0 = p.kv_head(h0) as u64;
            let products = Products {
                lq,
                lk,
                d,
                batch: n as i32,
                kv_shared: group > 1,
                inputs: blas_sys::cudaDataType::CUDA_R_32F,
                scores: blas_sys::cudaDataType::CUDA_R_32F,
                output: blas_sys::cudaDataType::CUDA_R_32F,
                compute: blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_PEDANTIC,
            };
            // SAFETY: the scratch buffers of this problem: Q and O hold B·H·Lq·D floats,
            // K and V B·Hkv·Lk·D, S `heads_per_pass`·Lq·Lk; heads [h0, h0 + n) are within,
            // and so are their K/V heads (one, or n from kv0 when not grouped).
            unsafe {
                products.scores(
                    &self.blas,
                    pq + h0 as u64 * q_head,
                    pk + kv0 * kv_head,
                    ps,
                    "the reference",
                )?
            };
            let rows = (n * lq as usize) as i32;
            let mask = p.mask_args();
            let scale = 1.0f32 / (d as f32).sqrt();
            let cfg = LaunchConfig {
                grid_dim: (rows as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut args = st.launch_builder(&self.softmax_fn);
            args.arg(&ps)
                .arg(&rows)
                .arg(&lq)
                .arg(&lk)
                .arg(&mask.causal)
                .arg(&mask.diag)
                .arg(&mask.window_left)
                .arg(&mask.window_right)
                .arg(&scale);
            // SAFETY: `evo_reference_softmax(float* S, int rows, int Lq, int Lk, int
            // causal, int diag, int wl, int wr, float scale)` over the `rows`·Lk scores
            // just computed.
            unsafe { args.launch(cfg) }.map_err(driver("the reference's softmax"))?;
            // SAFETY: as above; S holds P now.
            unsafe {
                products.weighted_sum(
                    &self.blas,
                    ps,
                    pv + kv0 * kv_head,
                    po + h0 as u64 * q_head,
                    "the reference",
                )?
            };
            h0 += n;
        }
        if inputs.is_none() {
            return Ok(None);
        }
        let n = st
            .clone_dtoh(&sc.counter)
            .map_err(driver("reading the input check"))?;
        Ok(Some(n[0] as u64))
    }

    /// Compares the 16-bit output at `o` with the last reference, row by row.
    pub fn compare(&self, p: &Problem, o: u64) -> Result<Vec<RowStat>, GateError> {
        let guard = self.scratch.lock().expect("the reference's scratch");
        let sc = guard.as_ref().filter(|s| s.problem == *p).ok_or_else(|| {
            GateError::Reference(format!("no device reference of {p} to compare with"))
        })?;
        let st = &self.stream;
        let rows = (p.batch * p.heads * p.q_len) as i32;
        let d = p.head_dim.get() as i32;
        let poison = crate::inputs::poison_bits(p.dtype) as u32;
        let bf16 = i32::from(p.dtype == Dtype::Bf16);
        let warps = 8u32;
        let cfg = LaunchConfig {
            grid_dim: ((rows as u32).div_ceil(warps), 1, 1),
            block_dim: (32 * warps, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut args = st.launch_builder(&self.compare_fn);
        args.arg(&o)
            .arg(&sc.o)
            .arg(&sc.rows)
            .arg(&rows)
            .arg(&d)
            .arg(&poison)
            .arg(&bf16);
        // SAFETY: `evo_compare_rows(const u16* O, const float* ref, RowStat* out, int
        // rows, int D, unsigned poison, int bf16)`: `o` holds B·H·Lq·D 16-bit elements of
        // this problem, the reference and the row buffer were sized for it.
        unsafe { args.launch(cfg) }.map_err(driver("comparing rows with the reference"))?;
        st.clone_dtoh(&sc.rows)
            .map_err(driver("reading the row comparison"))
    }

    /// The last reference's values at `rows` (`bh·Lq + row`), D floats each.
    pub fn rows_of_reference(&self, p: &Problem, rows: &[u32]) -> Result<Vec<f32>, GateError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let guard = self.scratch.lock().expect("the reference's scratch");
        let sc = guard
            .as_ref()
            .filter(|s| s.problem == *p)
            .ok_or_else(|| GateError::Reference(format!("no device reference of {p} to read")))?;
        let st = &self.stream;
        let d = p.head_dim.get() as i32;
        let index = st
            .clone_htod(rows)
            .map_err(driver("uploading the rows to read"))?;
        let mut out = alloc::<f32>(st, rows.len() * d as usize, "the reference's rows")?;
        let n = rows.len() as i32;
        let cfg = LaunchConfig {
            grid_dim: (
                (rows.len() * d as usize).div_ceil(256).min(4096) as u32,
                1,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut args = st.launch_builder(&self.gather_fn);
        args.arg(&sc.o).arg(&index).arg(&mut out).arg(&n).arg(&d);
        // SAFETY: `evo_gather_rows(const float* src, const unsigned* rows, float* dst, int
        // n, int D)`: every row index is below B·H·Lq (the caller's), `out` holds n·D.
        unsafe { args.launch(cfg) }.map_err(driver("gathering the reference's rows"))?;
        st.clone_dtoh(&out)
            .map_err(driver("reading the reference's rows"))
    }

    /// Adds to `*counter` the 32-bit words of `count` guard regions (`words` long,
    /// `stride` words apart from `base`) that no longer hold `pattern`.
    pub fn check_guards(
        &self,
        base: u64,
        stride: u64,
        count: usize,
        words: usize,
        pattern: u32,
        counter: u64,
    ) -> Result<(), GateError> {
        let cfg = LaunchConfig {
            grid_dim: (
                words.div_ceil(256).min(64) as u32,
                count.min(1024) as u32,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (count, words) = (count as i32, words as i32);
        let mut args = self.stream.launch_builder(&self.guards_fn);
        args.arg(&base)
            .arg(&stride)
            .arg(&count)
            .arg(&words)
            .arg(&pattern)
            .arg(&counter);
        // SAFETY: `evo_check_guards(const u32* base, u64 stride, int count, int words,
        // u32 pattern, u32* counter)`: the caller's regions are live and word aligned.
        unsafe { args.launch(cfg) }.map_err(driver("checking the guards"))?;
        Ok(())
    }

    /// Reads `buf` once and keeps nothing (`evo_read_over`): with `buf` twice the L2's
    /// size, L2 then holds only clean lines of it (see [`super::launch::L2Flush`]).
    pub fn read_over(
        &self,
        buf: &CudaSlice<u8>,
        sink: &mut CudaSlice<u32>,
    ) -> Result<(), GateError> {
        let words = (buf.len() / 16) as u64;
        let cfg = LaunchConfig {
            grid_dim: (words.div_ceil(256).clamp(1, 2048) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // No word of a zeroed buffer xors to this, so the kernel's store is never taken.
        let key: u32 = 0x9E37_79B9;
        let mut args = self.stream.launch_builder(&self.read_over_fn);
        args.arg(buf).arg(&words).arg(&key).arg(sink);
        // SAFETY: `evo_read_over(const uint4* buf, u64 words, u32 key, u32* sink)`: `buf`
        // is a live device buffer of at least 16 x `words` bytes (cudarc's allocations
        // are 256-byte aligned), `sink` a live one of at least one word.
        unsafe { args.launch(cfg) }.map_err(driver("reading over L2"))?;
        Ok(())
    }
}
