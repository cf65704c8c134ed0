//! A loaded attention kernel (generated or hand-written, kernels/ABI.md), as GREEN and
//! FAST run it: the runtime's module (`evo_runtime::AttentionModule`, which loads and
//! launches it) on the gates' slots, workspace and graphs.

use super::launch::{timed, L2Flush, LaunchGraph};
use super::rig::{Rig, Slots, Workspace};
use super::verifier::Verifier;
use super::{driver, Spare};
use crate::error::GateError;
use crate::inputs::Inputs;
use crate::kernel::{
    AttentionKernel, CheckRequest, Draw, Output, RepeatPlan, RowCheck, TimingMethod,
};
use crate::lse::{fresh_lse, lse_output, LseOutput};
use cudarc::driver::{CudaContext, CudaStream};
use evo_genome::Problem;
use evo_runtime::{
    AttentionModule, Buffers, CombineArgs, FwdArgs, Geometry, TensorMapArg, TensorMapSpec,
    TensorMaps,
};
use std::sync::Arc;

/// The tensor maps of every slot of each tensor (Q, K, V, and O for a kernel that stores
/// O by TMA), for a kernel that declares maps: a launch takes the maps of the slots its
/// draw names.
struct SlotMaps {
    q: Vec<TensorMapArg>,
    k: Vec<TensorMapArg>,
    v: Vec<TensorMapArg>,
    o: Vec<TensorMapArg>,
}

pub struct LoadedKernel {
    name: String,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: AttentionModule,
    maps: Option<SlotMaps>,
    rig: Option<Rig>,
    graph: Option<LaunchGraph>,
    flush: Option<L2Flush>,
    /// The device's kept timing slots: taken when prepared, given back when dropped.
    spare: Spare,
    verifier: Option<Arc<Verifier>>,
    /// FAST checked the launches of the current slots and all were right.
    verified: bool,
    /// A persistent kernel's grid as loaded (0: not persistent).
    full_grid: u32,
}

impl Drop for LoadedKernel {
    fn drop(&mut self) {
        if !self.verified {
            return;
        }
        if let Some(rig) = self.rig.take() {
            if let Ok(mut spare) = self.spare.lock() {
                *spare = Some(rig.into_slots());
            }
        }
    }
}

impl LoadedKernel {
    pub(crate) fn new(
        module: AttentionModule,
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        spare: Spare,
        verifier: Option<Arc<Verifier>>,
    ) -> LoadedKernel {
        LoadedKernel {
            name: module.name().to_string(),
            full_grid: module.geometry().persistent_grid,
            ctx,
            stream,
            module,
            maps: None,
            rig: None,
            graph: None,
            flush: None,
            spare,
            verifier,
            verified: false,
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.module.geometry()
    }

    /// The tensor maps the kernel asks for, if it loads through the copy engine.
    pub fn tensor_map_spec(&self) -> Option<TensorMapSpec> {
        self.module.tensor_map_spec()
    }

    /// Slots for `sets` sets of `problem` (reused when they fit; FAST's from the
    /// device's spare ones when they fit), the workspace, and the slots' tensor maps.
    fn ensure(&mut self, problem: Problem, sets: usize, fast: bool) -> Result<(), GateError> {
        let p = problem;
        self.graph = None;
        self.verified = false;
        if self
            .rig
            .as_ref()
            .is_some_and(|r| r.slots.fits(&p, sets, fast))
        {
            return Ok(());
        }
        self.rig = None;
        let kept = if fast {
            self.spare
                .lock()
                .ok()
                .and_then(|mut spare| spare.take_if(|s| s.fits(&p, sets, true)))
        } else {
            None
        };
        let slots = match kept {
            Some(slots) => slots,
            None => Slots::new(&self.stream, p, sets, fast)?,
        };
        let ws = match self.module.workspace_len(&p) {
            Some(lens) => Some(Workspace::new(&self.stream, lens)?),
            None => None,
        };
        self.maps = if self.module.tensor_map_spec().is_none() {
            None
        } else {
            // The runtime encodes each slot's maps as any launch's (Q's as the launch sees
            // it: a packing kernel's heads are K/V heads).
            let st = &self.stream;
            let (mut q, mut k, mut v, mut o) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for s in 0..slots.sets {
                let b = Buffers {
                    q: slots.q(s, st),
                    k: slots.k(s, st),
                    v: slots.v(s, st),
                    o: slots.o(s, st),
                    ..Buffers::default()
                };
                if let Some(m) = self.module.encode_maps(&p, &b)? {
                    q.push(m.q);
                    k.push(m.k);
                    v.push(m.v);
                    o.extend(m.o);
                }
            }
            Some(SlotMaps { q, k, v, o })
        };
        self.rig = Some(Rig::new(
            self.stream.clone(),
            slots,
            ws,
            self.verifier.clone(),
        )?);
        Ok(())
    }

    fn rig(&self) -> Result<&Rig, GateError> {
        self.rig
            .as_ref()
            .ok_or_else(|| GateError::Abi(format!("{}: launched before its buffers", self.name)))
    }

    fn rig_mut(&mut self) -> Result<&mut Rig, GateError> {
        let name = &self.name;
        self.rig
            .as_mut()
            .ok_or_else(|| GateError::Abi(format!("{name}: launched before its buffers")))
    }

    /// The arguments of the call that computes on `draw`'s slots (writing the
    /// forward's lse to `lse` when some).
    fn args(&self, draw: &Draw, lse: Option<u64>) -> Result<(FwdArgs, CombineArgs), GateError> {
        let rig = self.rig()?;
        let (st, p) = (&self.stream, rig.slots.problem);
        let (ws_o, ws_lse) = rig.ws.as_ref().map_or((0, 0), |w| w.ptrs(st));
        let maps = match &self.maps {
            Some(m) => {
                let pick = |v: &[TensorMapArg], i: usize| {
                    v.get(i).copied().ok_or_else(|| {
                        GateError::Abi(format!("{}: no tensor map for slot {i}", self.name))
                    })
                };
                Some(TensorMaps {
                    q: pick(&m.q, draw.q)?,
                    k: pick(&m.k, draw.k)?,
                    v: pick(&m.v, draw.v)?,
                    o: if m.o.is_empty() {
                        None
                    } else {
                        Some(pick(&m.o, draw.o)?)
                    },
                })
            }
            None => None,
        };
        let buffers = Buffers {
            q: rig.slots.q(draw.q, st),
            k: rig.slots.k(draw.k, st),
            v: rig.slots.v(draw.v, st),
            o: rig.slots.o(draw.o, st),
            ws_o,
            ws_lse,
        };
        Ok(self.module.args(&p, &buffers, maps, lse)?)
    }

    /// Enqueues one call (forward, then combine when split) on `draw`'s slots.
    fn launch(&self, draw: &Draw) -> Result<(), GateError> {
        self.launch_with_lse(draw, None)
    }

    /// [`Self::launch`], writing the forward's lse to `lse` when some.
    fn launch_with_lse(&self, draw: &Draw, lse: Option<u64>) -> Result<(), GateError> {
        let (mut fwd, mut combine) = self.args(draw, lse)?;
        let p = self.rig()?.slots.problem;
        // SAFETY: the ABI's arguments (`args`: this launch's slots and workspace, sized
        // for the prepared problem) on the device's stream, whose context is current.
        unsafe {
            self.module
                .enqueue(self.stream.cu_stream(), &p, &mut fwd, &mut combine)?
        };
        Ok(())
    }

    /// One call on `inputs` into a freshly poisoned O (and workspace), writing the
    /// forward's lse to `lse` when some, and O with its guards read back.
    fn run_checked(&mut self, inputs: &Inputs, lse: Option<u64>) -> Result<Output, GateError> {
        let p = inputs.problem;
        self.ensure(p, 1, false)?;
        let st = self.stream.clone();
        {
            let rig = self.rig_mut()?;
            rig.slots.upload(&st, inputs)?;
            if let Some(ws) = &mut rig.ws {
                ws.poison(&st)?;
            }
        }
        let first = Draw::first(inputs.seed);
        self.launch_with_lse(&first, lse)?;
        st.synchronize()
            .map_err(driver(format!("running {} on {}", self.name, p)))?;
        let rig = self.rig()?;
        let mut out = rig.slots.output(&st)?;
        if out.guard_breach.is_none() {
            if let Some(ws) = &rig.ws {
                out.guard_breach = ws.breach(&st)?;
            }
        }
        Ok(out)
    }

    /// Points the graph's launches at this repeat's draws.
    fn repoint(&self, draws: &[Draw]) -> Result<(), GateError> {
        let graph = self
            .graph
            .as_ref()
            .ok_or_else(|| GateError::Abi(format!("{}: no graph to re-point", self.name)))?;
        let p = self.rig()?.slots.problem;
        let (cfg_fwd, cfg_combine) = self.module.configs(&p);
        let per_call = 1 + usize::from(self.module.combine().is_some());
        if graph.len() != draws.len() * per_call {
            return Err(GateError::Abi(format!(
                "{}: the graph holds {} launches for {} calls",
                self.name,
                graph.len(),
                draws.len()
            )));
        }
        for (i, draw) in draws.iter().enumerate() {
            let (mut fwd, mut combine) = self.args(draw, None)?;
            graph.set(per_call * i, self.module.fwd(), cfg_fwd, &mut fwd)?;
            if let Some(f) = self.module.combine() {
                graph.set(per_call * i + 1, f, cfg_combine, &mut combine)?;
            }
        }
        Ok(())
    }
}

impl AttentionKernel for LoadedKernel {
    fn name(&self) -> &str {
        &self.name
    }

    /// See `AttentionModule::states`.
    fn states(&self, p: &Problem) -> Result<(), String> {
        self.module.states(p).map_err(|e| e.to_string())
    }

    fn run_once(&mut self, inputs: &Inputs) -> Result<Output, GateError> {
        self.run_checked(inputs, None)
    }

    fn writes_lse(&self, _problem: &Problem) -> bool {
        self.module.writes_lse()
    }

    fn run_once_with_lse(&mut self, inputs: &Inputs) -> Result<(Output, LseOutput), GateError> {
        let p = inputs.problem;
        let buffer = self
            .stream
            .clone_htod(&fresh_lse(&p))
            .map_err(driver(format!("allocating the lse of {p}")))?;
        let st = self.stream.clone();
        let out = self.run_checked(inputs, Some(super::ptr(&buffer, &st)))?;
        let back: Vec<f32> = self
            .stream
            .clone_dtoh(&buffer)
            .map_err(driver(format!("downloading the lse of {}", self.name)))?;
        Ok((out, lse_output(&p, &back)))
    }

    fn check_last_run(
        &mut self,
        inputs: &Inputs,
        reference_rows: &[u32],
    ) -> Result<Option<RowCheck>, GateError> {
        let rig = self.rig_mut()?;
        if rig.slots.problem != inputs.problem {
            return Err(GateError::Abi(format!(
                "check of {} after a launch on {}",
                inputs.problem, rig.slots.problem
            )));
        }
        rig.check_green(inputs, reference_rows).map(Some)
    }

    fn prepare_timing(&mut self, problem: &Problem, sets: usize) -> Result<(), GateError> {
        self.ensure(*problem, sets, true)?;
        self.rig_mut()?.reset_counters()
    }

    fn time_repeat(&mut self, plan: &RepeatPlan, method: TimingMethod) -> Result<f64, GateError> {
        self.rig_mut()?.prepare_repeat(plan.draws)?;
        let ms = match method {
            TimingMethod::Events => {
                // As before a graph replay: the sets just drawn are not left in L2.
                let v = self.verifier.as_deref();
                L2Flush::flush(&mut self.flush, &self.ctx, &self.stream, v)?;
                timed(&self.ctx, &self.stream, || {
                    plan.draws.iter().try_for_each(|d| self.launch(d))
                })?
            }
            TimingMethod::Graph => {
                if self.graph.is_none() {
                    let st = self.stream.clone();
                    let graph = LaunchGraph::capture(&st, plan.draws.len(), |i| {
                        self.launch(&plan.draws[i])
                    })?;
                    self.graph = Some(graph);
                }
                self.repoint(plan.draws)?;
                // The sets were just drawn (and O poisoned): the last ~50 MB of them
                // would still be in L2, and a graph of a few small launches would
                // start on cached inputs, which the SDPA baselines' rotation (drawn
                // long before) never does. Read over, each launch's inputs come from
                // memory, as for the baselines, and L2 holds no dirty line to write
                // back (L2Flush).
                let v = self.verifier.as_deref();
                L2Flush::flush(&mut self.flush, &self.ctx, &self.stream, v)?;
                let graph = self.graph.as_ref().expect("captured above");
                timed(&self.ctx, &self.stream, || graph.launch())?
            }
            TimingMethod::ColdL2 => {
                let (mut kept, draws) = (self.flush.take(), plan.draws);
                let verifier = self.verifier.clone();
                let ms = L2Flush::time_each(
                    &mut kept,
                    &self.ctx,
                    &self.stream,
                    verifier.as_deref(),
                    draws.len(),
                    |i| self.launch(&draws[i]),
                );
                self.flush = kept;
                ms?
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

    fn cap_persistent_grid(&mut self, ctas: Option<u32>) {
        let full = self.full_grid;
        self.module
            .cap_persistent_grid(ctas.map_or(full, |c| c.clamp(1, full.max(1))));
    }

    fn timing_verified(&mut self) {
        self.verified = true;
    }
}
