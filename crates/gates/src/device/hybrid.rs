//! The seeds' cuBLAS hybrid, the baseline every report times beside the kernels:
//! S = Q·Kᵀ (cuBLAS, fp32 out), P = softmax(S·scale + mask) (fp32 math, 16-bit out),
//! O = P·V (cuBLAS, 16-bit out), all on the device's stream. It is timed and checked
//! like any kernel; its graph is captured again every repeat (cuBLAS calls are not
//! single kernel nodes that could be re-pointed).

use super::blas::Products;
use super::launch::{capture, timed, L2Flush};
use super::rig::{Rig, Slots};
use super::verifier::Verifier;
use super::{alloc, driver, ptr};
use crate::error::GateError;
use crate::inputs::Inputs;
use crate::kernel::{
    AttentionKernel, CheckRequest, Draw, Output, RepeatPlan, RowCheck, TimingMethod,
};
use cudarc::cublas::{sys as blas_sys, CudaBlas};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use evo_genome::{Dtype, Problem};
use std::sync::Arc;

pub struct HybridKernel {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    _modules: Vec<Arc<CudaModule>>,
    softmax: Vec<(Dtype, CudaFunction)>,
    rig: Option<Rig>,
    verifier: Option<Arc<Verifier>>,
    /// S (fp32) and P (16-bit), shared by the input sets: they are the hybrid's own
    /// intermediates, B·H·Lq·Lk each.
    scratch: Option<(Problem, CudaSlice<f32>, CudaSlice<u16>)>,
    /// Written over L2 before a graph replay, as for the kernels (loaded.rs).
    flush: Option<L2Flush>,
}

/// Threads per row of the hybrid's softmax kernel.
const SOFTMAX_THREADS: u32 = 256;

impl HybridKernel {
    pub(crate) fn new(
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        blas: CudaBlas,
        modules: Vec<Arc<CudaModule>>,
        softmax: Vec<(Dtype, CudaFunction)>,
        verifier: Option<Arc<Verifier>>,
    ) -> HybridKernel {
        HybridKernel {
            ctx,
            stream,
            blas,
            _modules: modules,
            softmax,
            rig: None,
            verifier,
            scratch: None,
            flush: None,
        }
    }

    fn ensure(&mut self, p: Problem, sets: usize, fast: bool) -> Result<(), GateError> {
        self.states(&p).map_err(GateError::Abi)?;
        if !self
            .rig
            .as_ref()
            .is_some_and(|r| r.slots.fits(&p, sets, fast))
        {
            self.rig = None;
            let slots = Slots::new(&self.stream, p, sets, fast)?;
            self.rig = Some(Rig::new(
                self.stream.clone(),
                slots,
                None,
                self.verifier.clone(),
            )?);
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

    fn rig_mut(&mut self) -> Result<&mut Rig, GateError> {
        self.rig
            .as_mut()
            .ok_or_else(|| GateError::Abi("cublas-hybrid: launched before its buffers".into()))
    }

    fn launch(&self, draw: &Draw) -> Result<(), GateError> {
        let rig = self
            .rig
            .as_ref()
            .ok_or_else(|| GateError::Abi("launch before buffers".into()))?;
        let (_, s, pm) = self
            .scratch
            .as_ref()
            .ok_or_else(|| GateError::Abi("launch before scratch".into()))?;
        let p = rig.slots.problem;
        let st = &self.stream;
        let (pq, pk, pv, po) = (
            rig.slots.q(draw.q, st),
            rig.slots.k(draw.k, st),
            rig.slots.v(draw.v, st),
            rig.slots.o(draw.o, st),
        );
        let (ps, pp) = (ptr(s, st), ptr(pm, st));
        let (lq, lk, d) = (p.q_len as i32, p.kv_len as i32, p.head_dim.get() as i32);
        let bh = (p.batch * p.heads) as i32;
        let elem = match p.dtype {
            Dtype::F16 => blas_sys::cudaDataType::CUDA_R_16F,
            Dtype::Bf16 => blas_sys::cudaDataType::CUDA_R_16BF,
        };
        let products = Products {
            lq,
            lk,
            d,
            batch: bh,
            kv_shared: false,
            inputs: elem,
            scores: blas_sys::cudaDataType::CUDA_R_32F,
            output: elem,
            compute: blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        };
        // SAFETY: the slots of this draw hold B·H heads of the prepared problem (Q, K,
        // V: 16-bit; S: fp32 scratch of B·H·Lq·Lk).
        unsafe { products.scores(&self.blas, pq, pk, ps, "the hybrid")? };
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
        // SAFETY: P is the 16-bit scratch of B·H·Lq·Lk just written, V and O the draw's.
        unsafe { products.weighted_sum(&self.blas, pp, pv, po, "the hybrid")? };
        Ok(())
    }
}

impl AttentionKernel for HybridKernel {
    fn name(&self) -> &str {
        "cublas-hybrid"
    }

    fn states(&self, problem: &Problem) -> Result<(), String> {
        if problem.is_basic() {
            Ok(())
        } else {
            Err(format!(
                "cublas-hybrid states only multi-head attention with a top-left causal mask \
                 or none, not {problem}; the SDPA baselines (scripts/sdpa_baseline.py) \
                 cover it"
            ))
        }
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        self.ensure(inputs.problem, 1, false)?;
        let st = self.stream.clone();
        self.rig_mut()?.slots.upload(&st, inputs)?;
        let first = Draw::first(inputs.seed);
        self.launch(&first)?;
        st.synchronize().map_err(driver(format!(
            "running cublas-hybrid on {}",
            inputs.problem
        )))?;
        self.rig_mut()?.slots.output(&st)
    }

    fn check_last_run(
        &mut self,
        inputs: &Inputs,
        reference_rows: &[u32],
    ) -> Result<Option<RowCheck>, GateError> {
        self.rig_mut()?
            .check_green(inputs, reference_rows)
            .map(Some)
    }

    fn prepare_timing(&mut self, problem: &Problem, sets: usize) -> Result<(), GateError> {
        self.ensure(*problem, sets, true)?;
        self.rig_mut()?.reset_counters()
    }

    fn time_repeat(&mut self, plan: &RepeatPlan, method: TimingMethod) -> Result<f64, GateError> {
        self.rig_mut()?.prepare_repeat(plan.draws)?;
        let ms = match method {
            TimingMethod::Events => timed(&self.ctx, &self.stream, || {
                plan.draws.iter().try_for_each(|d| self.launch(d))
            })?,
            TimingMethod::Graph => {
                let st = self.stream.clone();
                let graph = capture(&st, plan.draws.len(), |i| self.launch(&plan.draws[i]))?;
                let v = self.verifier.as_deref();
                L2Flush::flush(&mut self.flush, &self.ctx, &self.stream, v)?;
                timed(&self.ctx, &self.stream, || {
                    graph.launch().map_err(driver("replaying the graph"))
                })?
            }
            // The hybrid is the seeds' baseline, compared back to back only; a cold-L2
            // comparison is with the library (`evo bench --cold-l2` times SDPA so).
            TimingMethod::ColdL2 => {
                return Err(GateError::Abi(
                    "the cuBLAS hybrid is not timed on a cold L2".into(),
                ))
            }
        };
        self.rig_mut()?.finish_repeat(plan.keep)?;
        Ok(ms)
    }

    fn check_timed(&mut self, requests: &[CheckRequest]) -> Result<Vec<RowCheck>, GateError> {
        self.rig_mut()?.check(requests)
    }

    fn prepared(&self) -> Option<Problem> {
        self.rig.as_ref().map(|r| r.slots.problem)
    }
}
