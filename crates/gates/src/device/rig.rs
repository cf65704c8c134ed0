//! A kernel's buffers on the device: the input slots and outputs of GREEN's launch (one
//! set) or of FAST's repeats (`sets` of each), the archive every timed repeat copies
//! its outputs into, the split-KV workspace, and the checks on all of them.
//!
//! Each tensor of every slot lives in one allocation (slot `i` at offset `i` times its
//! size): drawing every slot is one launch of the generator, poisoning every O one
//! copy. Every O is followed by a guard region of [`GUARD_ELEMS`] elements; after each
//! timed repeat (before the next poisoning restores them) the device counts guard words
//! that changed, so a kernel that writes past its output in any repeat is caught.

use super::verifier::{DrawJob, Verifier};
use super::{alloc, driver, ptr};
use crate::error::GateError;
use crate::inputs::{fresh_output, guard_breach, Inputs, GUARD_BITS, GUARD_ELEMS, GUARD_F32_BITS};
use crate::kernel::{CheckRequest, Draw, Output, RowCheck};
use crate::verify::{Findings, LaunchStats};
use cudarc::driver::{CudaSlice, CudaStream};
use evo_genome::Problem;
use std::sync::Arc;

/// Q, K, V and O slots of one problem, `sets` of each.
pub(crate) struct Slots {
    pub problem: Problem,
    pub sets: usize,
    q: CudaSlice<u16>,
    k: CudaSlice<u16>,
    v: CudaSlice<u16>,
    /// Every O, each followed by its guard.
    o: CudaSlice<u16>,
    /// Every O poisoned with its guard: what `o` is reset to.
    fresh_o: CudaSlice<u16>,
    /// FAST's copies of `o` after a repeat: [kept, scratch].
    archive: Option<[CudaSlice<u16>; 2]>,
}

impl Slots {
    pub fn new(
        stream: &Arc<CudaStream>,
        problem: Problem,
        sets: usize,
        archive: bool,
    ) -> Result<Slots, GateError> {
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
        let archive = if archive {
            Some([
                alloc::<u16>(stream, all_o.len(), "the kept outputs")?,
                alloc::<u16>(stream, all_o.len(), "the archived outputs")?,
            ])
        } else {
            None
        };
        Ok(Slots {
            problem: p,
            sets,
            q: alloc::<u16>(stream, p.q_elems() * sets, "Q")?,
            k: alloc::<u16>(stream, p.kv_elems() * sets, "K")?,
            v: alloc::<u16>(stream, p.kv_elems() * sets, "V")?,
            o,
            fresh_o,
            archive,
        })
    }

    /// True when these slots serve `problem` with `sets` sets (and FAST's archive if asked).
    pub fn fits(&self, problem: &Problem, sets: usize, archive: bool) -> bool {
        self.problem == *problem && self.sets == sets.max(1) && self.archive.is_some() == archive
    }

    /// Elements of one O with its guard.
    fn o_stride(&self) -> usize {
        self.problem.q_elems() + GUARD_ELEMS
    }

    pub fn q(&self, slot: usize, st: &CudaStream) -> u64 {
        ptr(&self.q, st) + (slot * self.problem.q_elems() * 2) as u64
    }
    pub fn k(&self, slot: usize, st: &CudaStream) -> u64 {
        ptr(&self.k, st) + (slot * self.problem.kv_elems() * 2) as u64
    }
    pub fn v(&self, slot: usize, st: &CudaStream) -> u64 {
        ptr(&self.v, st) + (slot * self.problem.kv_elems() * 2) as u64
    }
    pub fn o(&self, slot: usize, st: &CudaStream) -> u64 {
        ptr(&self.o, st) + (slot * self.o_stride() * 2) as u64
    }

    /// O slot `slot` as the kept repeat left it.
    fn kept_o(&self, slot: usize, st: &CudaStream) -> Result<u64, GateError> {
        let [kept, _] = self
            .archive
            .as_ref()
            .ok_or_else(|| GateError::Abi("no kept outputs outside FAST".into()))?;
        Ok(ptr(kept, st) + (slot * self.o_stride() * 2) as u64)
    }

    /// Uploads `inputs` into slot 0 and poisons its O (GREEN).
    pub fn upload(&mut self, st: &Arc<CudaStream>, inputs: &Inputs) -> Result<(), GateError> {
        let (nq, nkv, no) = (
            self.problem.q_elems(),
            self.problem.kv_elems(),
            self.o_stride(),
        );
        st.memcpy_htod(&inputs.q, &mut self.q.slice_mut(0..nq))
            .map_err(driver("uploading Q"))?;
        st.memcpy_htod(&inputs.k, &mut self.k.slice_mut(0..nkv))
            .map_err(driver("uploading K"))?;
        st.memcpy_htod(&inputs.v, &mut self.v.slice_mut(0..nkv))
            .map_err(driver("uploading V"))?;
        st.memcpy_dtod(&self.fresh_o.slice(0..no), &mut self.o.slice_mut(0..no))
            .map_err(driver("poisoning O"))
    }

    /// Every O poisoned, every guard restored.
    pub fn poison(&mut self, st: &Arc<CudaStream>) -> Result<(), GateError> {
        st.memcpy_dtod(&self.fresh_o, &mut self.o)
            .map_err(driver("poisoning O"))
    }

    /// Copies every O aside: to the kept archive when `keep`, else to the scratch one.
    pub fn archive(&mut self, st: &Arc<CudaStream>, keep: bool) -> Result<(), GateError> {
        let Some(archive) = self.archive.as_mut() else {
            return Ok(());
        };
        st.memcpy_dtod(&self.o, &mut archive[usize::from(!keep)])
            .map_err(driver("archiving the outputs"))
    }

    /// O slot 0 and whether its guard still holds (GREEN).
    pub fn output(&self, st: &Arc<CudaStream>) -> Result<Output, GateError> {
        let stride = self.o_stride();
        let all = st
            .clone_dtoh(&self.o.slice(0..stride))
            .map_err(driver("downloading O"))?;
        let (o, guard) = all.split_at(self.problem.q_elems());
        Ok(Output {
            o: o.to_vec(),
            guard_breach: guard_breach("O", guard, GUARD_BITS),
        })
    }

    /// Adds the changed words of every O's guard to `*counter` (on the device).
    fn check_guards(
        &self,
        st: &CudaStream,
        verifier: &Verifier,
        counter: u64,
    ) -> Result<(), GateError> {
        let pattern = (GUARD_BITS as u32) << 16 | GUARD_BITS as u32;
        verifier.check_guards(
            self.o(0, st) + (self.problem.q_elems() * 2) as u64,
            (self.o_stride() / 2) as u64,
            self.sets,
            GUARD_ELEMS / 2,
            pattern,
            counter,
        )
    }
}

/// The split-KV workspace: `ws_o` and `ws_lse`, each followed by [`GUARD_ELEMS`]
/// guard floats, and the poisoned copies they are reset from.
pub(crate) struct Workspace {
    ws_o: CudaSlice<f32>,
    ws_lse: CudaSlice<f32>,
    fresh_o: CudaSlice<f32>,
    fresh_lse: CudaSlice<f32>,
    /// Floats of ws_o and ws_lse before their guards.
    lens: (usize, usize),
}

impl Workspace {
    /// A workspace of `o_len` and `lse_len` floats (the module's size for the problem:
    /// `evo_runtime::AttentionModule::workspace_len`).
    pub fn new(
        st: &Arc<CudaStream>,
        (o_len, lse_len): (usize, usize),
    ) -> Result<Workspace, GateError> {
        let fresh = |n: usize, what: &str| {
            let mut v = vec![f32::NAN; n + GUARD_ELEMS];
            v[n..].fill(f32::from_bits(GUARD_F32_BITS));
            st.clone_htod(&v)
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

    /// Device addresses of ws_o and ws_lse.
    pub fn ptrs(&self, st: &CudaStream) -> (u64, u64) {
        (ptr(&self.ws_o, st), ptr(&self.ws_lse, st))
    }

    /// Poisons both halves with NaN (a combine that reads a slot the forward kernel
    /// never wrote produces NaN, not a stale value) and restores their guards.
    pub fn poison(&mut self, st: &Arc<CudaStream>) -> Result<(), GateError> {
        st.memcpy_dtod(&self.fresh_o, &mut self.ws_o)
            .map_err(driver("poisoning ws_o"))?;
        st.memcpy_dtod(&self.fresh_lse, &mut self.ws_lse)
            .map_err(driver("poisoning ws_lse"))
    }

    /// Whether a call wrote past the end of either half (GREEN: downloaded and named).
    pub fn breach(&self, st: &Arc<CudaStream>) -> Result<Option<String>, GateError> {
        for (what, buf, len) in [
            ("ws_o", &self.ws_o, self.lens.0),
            ("ws_lse", &self.ws_lse, self.lens.1),
        ] {
            if let Some(b) = f32_guard_breach(st, what, buf, len)? {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    /// Adds the changed guard words of both halves to `*counter` (on the device).
    fn check_guards(
        &self,
        st: &CudaStream,
        verifier: &Verifier,
        counter: u64,
    ) -> Result<(), GateError> {
        for (buf, len) in [(&self.ws_o, self.lens.0), (&self.ws_lse, self.lens.1)] {
            verifier.check_guards(
                ptr(buf, st) + (len * 4) as u64,
                0,
                1,
                GUARD_ELEMS,
                GUARD_F32_BITS,
                counter,
            )?;
        }
        Ok(())
    }
}

/// A kernel's state on the device: its slots and workspace, the verifier, and the
/// guard words found changed after any timed repeat ([O, workspace]).
pub(crate) struct Rig {
    pub slots: Slots,
    pub ws: Option<Workspace>,
    breaches: CudaSlice<u32>,
    verifier: Option<Arc<Verifier>>,
    stream: Arc<CudaStream>,
}

impl Rig {
    pub fn new(
        stream: Arc<CudaStream>,
        slots: Slots,
        ws: Option<Workspace>,
        verifier: Option<Arc<Verifier>>,
    ) -> Result<Rig, GateError> {
        Ok(Rig {
            breaches: alloc::<u32>(&stream, 2, "the guard counters")?,
            slots,
            ws,
            verifier,
            stream,
        })
    }

    fn verifier(&self) -> Result<Arc<Verifier>, GateError> {
        self.verifier.clone().ok_or_else(|| {
            GateError::Reference(
                "this device has no verifier (Device::install_verifier): FAST and GREEN's \
                 large cases cannot check a launch without it"
                    .into(),
            )
        })
    }

    /// Before a timed repeat: every slot a draw names drawn anew, every O and the
    /// workspace poisoned.
    pub fn prepare_repeat(&mut self, draws: &[Draw]) -> Result<(), GateError> {
        let st = &self.stream;
        let p = self.slots.problem;
        let jobs: Vec<DrawJob> = draws
            .iter()
            .flat_map(|d| {
                DrawJob::inputs16(
                    &p,
                    d.seed,
                    1.0,
                    [
                        self.slots.q(d.q, st),
                        self.slots.k(d.k, st),
                        self.slots.v(d.v, st),
                    ],
                )
            })
            .collect();
        self.verifier()?.draw(p.dtype, &jobs)?;
        self.slots.poison(st)?;
        if let Some(ws) = &mut self.ws {
            ws.poison(st)?;
        }
        Ok(())
    }

    /// After a timed repeat: every O copied aside, every guard counted.
    pub fn finish_repeat(&mut self, keep: bool) -> Result<(), GateError> {
        let st = &self.stream;
        self.slots.archive(st, keep)?;
        let verifier = self.verifier()?;
        let counters = ptr(&self.breaches, st);
        self.slots.check_guards(st, &verifier, counters)?;
        if let Some(ws) = &self.ws {
            ws.check_guards(st, &verifier, counters + 4)?;
        }
        Ok(())
    }

    /// Checks launches of the timed repeats (see `AttentionKernel::check_timed`).
    pub fn check(&mut self, requests: &[CheckRequest]) -> Result<Vec<RowCheck>, GateError> {
        let st = self.stream.clone();
        let verifier = self.verifier()?;
        let p = self.slots.problem;
        let counts = st
            .clone_dtoh(&self.breaches)
            .map_err(driver("reading the guard counters"))?;
        let guard_breach = match (counts[0], counts[1]) {
            (0, 0) => None,
            (o, 0) => Some(format!(
                "wrote past the end of O in a timed repeat: {o} guard words after the outputs \
                 were overwritten"
            )),
            (_, w) => Some(format!(
                "wrote past the end of the split-KV workspace in a timed repeat: {w} guard \
                 words overwritten"
            )),
        };
        requests
            .iter()
            .map(|r| {
                let d = r.draw;
                let live = [
                    self.slots.q(d.q, &st),
                    self.slots.k(d.k, &st),
                    self.slots.v(d.v, &st),
                ];
                let inputs_changed =
                    verifier.reference(&p, d.seed, 1.0, (!r.archived).then_some(live))?;
                let o = if r.archived {
                    self.slots.kept_o(d.o, &st)?
                } else {
                    self.slots.o(d.o, &st)
                };
                let rows = verifier.compare(&p, o)?;
                Ok(RowCheck {
                    stats: LaunchStats::from_rows(&p, &rows),
                    reference_at: verifier.rows_of_reference(&p, &r.reference_rows)?,
                    findings: Findings {
                        guard_breach: guard_breach.clone(),
                        inputs_changed,
                    },
                })
            })
            .collect()
    }

    /// GREEN's check of the launch just run on slot 0 with `inputs`: every row against
    /// the device reference of `inputs`' seed and gain.
    pub fn check_green(
        &mut self,
        inputs: &Inputs,
        reference_rows: &[u32],
    ) -> Result<RowCheck, GateError> {
        let st = self.stream.clone();
        let verifier = self.verifier()?;
        let p = inputs.problem;
        let live = [
            self.slots.q(0, &st),
            self.slots.k(0, &st),
            self.slots.v(0, &st),
        ];
        let inputs_changed = verifier.reference(&p, inputs.seed, inputs.q_gain, Some(live))?;
        let rows = verifier.compare(&p, self.slots.o(0, &st))?;
        Ok(RowCheck {
            stats: LaunchStats::from_rows(&p, &rows),
            reference_at: verifier.rows_of_reference(&p, reference_rows)?,
            findings: Findings {
                guard_breach: None,
                inputs_changed,
            },
        })
    }

    /// Clears the guard counters (a new FAST).
    pub fn reset_counters(&mut self) -> Result<(), GateError> {
        self.stream
            .memset_zeros(&mut self.breaches)
            .map_err(driver("clearing the guard counters"))
    }

    /// The slots, given up (to be kept for the next kernel).
    pub fn into_slots(self) -> Slots {
        self.slots
    }
}

/// Whether a call wrote past `len` floats of `buf` (named `what`): its guard words,
/// downloaded and compared with [`GUARD_F32_BITS`], where and how much they changed.
pub(super) fn f32_guard_breach(
    st: &Arc<CudaStream>,
    what: &str,
    buf: &CudaSlice<f32>,
    len: usize,
) -> Result<Option<String>, GateError> {
    let guard: Vec<u32> = st
        .clone_dtoh(&buf.slice(len..))
        .map_err(driver(format!("downloading the guard of {what}")))?
        .iter()
        .map(|x: &f32| x.to_bits())
        .collect();
    Ok(guard_breach(what, &guard, GUARD_F32_BITS))
}
