//! A backward kernel (kernels/ABI.md, "The backward ABI") as the gates run it: one
//! call on uploaded inputs for GREEN, with every buffer guarded, the outputs poisoned
//! and the inputs read back; and FAST's timed calls on inputs the device draws anew for
//! every repeat, each launch's outputs kept for the check that follows.

use super::launch::{timed, L2Flush};
use super::rig::f32_guard_breach;
use super::verifier::{DrawJob, Verifier};
use super::{driver, ptr};
use crate::backward::inputs::D_O_STREAM;
use crate::error::GateError;
use crate::inputs::{guard_breach, poison_bits, GUARD_BITS, GUARD_ELEMS, GUARD_F32_BITS};
use crate::philox::value_scale;
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream};
use evo_genome::Problem;
use evo_runtime::{bwd_workspace_len, BackwardModule, BwdBuffers};
use std::sync::Arc;

/// One call's tensors as 16-bit bits (and lse as floats): what GREEN uploads.
#[derive(Debug, Clone)]
pub struct BackwardTensors<'a> {
    pub problem: Problem,
    pub q: &'a [u16],
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub o: &'a [u16],
    pub d_o: &'a [u16],
    pub lse: &'a [f32],
}

/// What one call wrote, and what it should not have.
#[derive(Debug, Clone)]
pub struct BackwardOutput {
    pub dq: Vec<u16>,
    pub dk: Vec<u16>,
    pub dv: Vec<u16>,
    /// The first guard region found changed (a write past a buffer), named.
    pub breach: Option<String>,
    /// The first input found changed by the call, named.
    pub inputs_changed: Option<String>,
}

/// The buffers of one call, each followed by a guard region of [`GUARD_ELEMS`].
struct CallBuffers {
    half: Vec<(&'static str, CudaSlice<u16>, usize)>,
    lse: CudaSlice<f32>,
    ws: CudaSlice<f32>,
    lens: (usize, usize),
}

const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const O: usize = 3;
const DO: usize = 4;
const DQ: usize = 5;
const DK: usize = 6;
const DV: usize = 7;
const NAMES: [&str; 8] = ["Q", "K", "V", "O", "dO", "dQ", "dK", "dV"];

fn lens(p: &Problem) -> [usize; 8] {
    let (q, kv) = (p.q_elems(), p.kv_elems());
    [q, kv, kv, q, q, q, kv, kv]
}

impl CallBuffers {
    /// Allocates every buffer of `p`: inputs zeroed, outputs poisoned, workspace NaN,
    /// every guard set.
    fn new(st: &Arc<CudaStream>, p: &Problem) -> Result<CallBuffers, GateError> {
        let poison = poison_bits(p.dtype);
        let mut half = Vec::new();
        for (i, n) in lens(p).into_iter().enumerate() {
            let fill = if i >= DQ { poison } else { 0 };
            let mut host = vec![fill; n + GUARD_ELEMS];
            host[n..].fill(GUARD_BITS);
            let buf = st
                .clone_htod(&host)
                .map_err(driver(format!("allocating {}", NAMES[i])))?;
            half.push((NAMES[i], buf, n));
        }
        let floats = |n: usize, fill: f32, what: &str| {
            let mut host = vec![fill; n + GUARD_ELEMS];
            host[n..].fill(f32::from_bits(GUARD_F32_BITS));
            st.clone_htod(&host)
                .map_err(driver(format!("allocating {what}")))
        };
        let lens = ((p.batch * p.heads * p.q_len) as usize, bwd_workspace_len(p));
        Ok(CallBuffers {
            half,
            lse: floats(lens.0, 0.0, "lse")?,
            ws: floats(lens.1, f32::NAN, "the backward workspace")?,
            lens,
        })
    }

    fn ptrs(&self, st: &CudaStream) -> BwdBuffers {
        let h = |i: usize| ptr(&self.half[i].1, st);
        BwdBuffers {
            q: h(Q),
            k: h(K),
            v: h(V),
            o: h(O),
            d_o: h(DO),
            lse: ptr(&self.lse, st),
            dq: h(DQ),
            dk: h(DK),
            dv: h(DV),
            ws: ptr(&self.ws, st),
        }
    }

    fn upload(&mut self, st: &Arc<CudaStream>, t: &BackwardTensors) -> Result<(), GateError> {
        for (i, src) in [t.q, t.k, t.v, t.o, t.d_o].into_iter().enumerate() {
            let (what, buf, n) = &mut self.half[i];
            check_len(what, src.len(), *n)?;
            st.memcpy_htod(src, &mut buf.slice_mut(..*n))
                .map_err(driver(format!("uploading {what}")))?;
        }
        check_len("lse", t.lse.len(), self.lens.0)?;
        st.memcpy_htod(t.lse, &mut self.lse.slice_mut(..self.lens.0))
            .map_err(driver("uploading lse"))
    }

    fn download(&self, st: &Arc<CudaStream>, i: usize) -> Result<Vec<u16>, GateError> {
        let (what, buf, _) = &self.half[i];
        st.clone_dtoh(buf)
            .map_err(driver(format!("downloading {what}")))
    }

    /// The first changed guard of any buffer, named. Only the guards are read: FAST
    /// checks them after every pass, and a whole buffer each time would be most of its
    /// wall time at a training shape.
    fn breach(&self, st: &Arc<CudaStream>) -> Result<Option<String>, GateError> {
        for (what, buf, n) in &self.half {
            let guard = st
                .clone_dtoh(&buf.slice(*n..))
                .map_err(driver(format!("downloading the guard of {what}")))?;
            if let Some(b) = guard_breach(what, &guard, GUARD_BITS) {
                return Ok(Some(b));
            }
        }
        for (what, buf, n) in [
            ("lse", &self.lse, self.lens.0),
            ("the workspace", &self.ws, self.lens.1),
        ] {
            if let Some(b) = f32_guard_breach(st, what, buf, n)? {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }
}

fn check_len(what: &str, got: usize, want: usize) -> Result<(), GateError> {
    if got == want {
        return Ok(());
    }
    Err(GateError::Reference(format!(
        "{what} has {got} elements, the problem needs {want}"
    )))
}

/// A loaded backward module with the device's stream and verifier.
pub struct LoadedBackward {
    module: BackwardModule,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    verifier: Option<Arc<Verifier>>,
    flush: Option<L2Flush>,
}

/// One timed configuration's per-call times (µs), one per repeat.
#[derive(Debug, Clone, PartialEq)]
pub struct BackwardTimes {
    pub warm_us: Vec<f64>,
    pub cold_us: Vec<f64>,
}

/// The inputs of one timed launch, by seed: Q, K, V are `Inputs::random(p, seed, 1)`'s,
/// dO and O the Philox streams [`D_O_STREAM`] and [`O_STREAM`] of the same seed
/// (`draw_stream`); `lse` as drawn on the host ([`timing_lse`]).
#[derive(Debug, Clone)]
pub struct TimedLaunch {
    pub seed: u64,
    pub lse: Vec<f32>,
    pub dq: Vec<u16>,
    pub dk: Vec<u16>,
    pub dv: Vec<u16>,
}

/// The Philox stream of a timed launch's O (any O is a valid input: the backward reads
/// it only in dpsum = rowsum(dO ∘ O)).
pub const O_STREAM: u32 = 4;

impl LoadedBackward {
    pub(crate) fn new(
        module: BackwardModule,
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        verifier: Option<Arc<Verifier>>,
    ) -> LoadedBackward {
        LoadedBackward {
            module,
            ctx,
            stream,
            verifier,
            flush: None,
        }
    }

    pub fn name(&self) -> &str {
        self.module.name()
    }

    pub fn module(&self) -> &BackwardModule {
        &self.module
    }

    /// One call on `t`: every output poisoned first, every buffer guarded; returns the
    /// outputs and whether a guard or an input changed.
    pub fn run_once(&mut self, t: &BackwardTensors) -> Result<BackwardOutput, GateError> {
        let st = self.stream.clone();
        let p = t.problem;
        let mut bufs = CallBuffers::new(&st, &p)?;
        bufs.upload(&st, t)?;
        // SAFETY: every buffer is sized for `p` (lens, bwd_workspace_len) and lives on
        // this module's context; the stream is the device's one.
        unsafe { self.module.backward(st.cu_stream(), &p, &bufs.ptrs(&st)) }?;
        st.synchronize()
            .map_err(driver(format!("running {}", self.name())))?;
        let breach = bufs.breach(&st)?;
        let mut inputs_changed = None;
        for (i, src) in [t.q, t.k, t.v, t.o, t.d_o].into_iter().enumerate() {
            let now = bufs.download(&st, i)?;
            if let Some(at) = now[..src.len()].iter().zip(src).position(|(a, b)| a != b) {
                inputs_changed = Some(format!("{} changed at element {at}", NAMES[i]));
                break;
            }
        }
        if inputs_changed.is_none() {
            let now: Vec<f32> = st
                .clone_dtoh(&bufs.lse.slice(..bufs.lens.0))
                .map_err(driver("downloading lse"))?;
            if let Some(at) = now
                .iter()
                .zip(t.lse)
                .position(|(a, b)| a.to_bits() != b.to_bits())
            {
                inputs_changed = Some(format!("lse changed at element {at}"));
            }
        }
        let part = |i: usize| -> Result<Vec<u16>, GateError> {
            let mut all = bufs.download(&st, i)?;
            all.truncate(bufs.half[i].2);
            Ok(all)
        };
        Ok(BackwardOutput {
            dq: part(DQ)?,
            dk: part(DK)?,
            dv: part(DV)?,
            breach,
            inputs_changed,
        })
    }

    /// Times the backward of `p`: each repeat is a warm pass (its calls back to back
    /// between two events) and a cold pass (L2 read over before each call, each call
    /// between its own events), each call on its own inputs drawn on the device before
    /// its pass from `seeds[r][i]` (the first half of a repeat's seeds the warm pass's,
    /// the second half the cold pass's), so no call sees inputs another call saw: a
    /// kernel that remembered an earlier call's results by their pointers or contents
    /// would have nothing to reuse. Returns the per-call times and the last repeat's
    /// launches of both passes with their outputs, for the check that follows.
    pub fn time(
        &mut self,
        p: &Problem,
        seeds: &[Vec<u64>],
        lse_of: &dyn Fn(u64) -> Vec<f32>,
    ) -> Result<(BackwardTimes, Vec<TimedLaunch>), GateError> {
        let verifier = self.verifier.clone().ok_or_else(|| {
            GateError::Reference(
                "timing needs the gates' verifier; install it before loading the kernel".into(),
            )
        })?;
        let st = self.stream.clone();
        let sets = seeds.first().map_or(0, |s| s.len() / 2);
        if sets == 0 || seeds.iter().any(|s| s.len() != 2 * sets) {
            return Err(GateError::Reference(
                "backward timing needs an even, equal number of seeds per repeat".into(),
            ));
        }
        let mut bufs = (0..sets)
            .map(|_| CallBuffers::new(&st, p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut times = BackwardTimes {
            warm_us: Vec::new(),
            cold_us: Vec::new(),
        };
        let mut last = Vec::new();
        for (r, repeat) in seeds.iter().enumerate() {
            for (pass, pass_seeds) in repeat.chunks(sets).enumerate() {
                let mut lses = Vec::with_capacity(sets);
                for (b, &seed) in bufs.iter_mut().zip(pass_seeds) {
                    draw_call(&verifier, &st, p, b, seed)?;
                    let lse = lse_of(seed);
                    st.memcpy_htod(&lse, &mut b.lse.slice_mut(..b.lens.0))
                        .map_err(driver("uploading lse"))?;
                    lses.push(lse);
                }
                let ptrs: Vec<BwdBuffers> = bufs.iter().map(|b| b.ptrs(&st)).collect();
                let module = &self.module;
                let call = |b: &BwdBuffers| {
                    // SAFETY: as in run_once: every buffer of `bufs` is sized for `p`.
                    unsafe { module.backward(st.cu_stream(), p, b) }.map_err(GateError::from)
                };
                if pass == 0 {
                    L2Flush::flush(&mut self.flush, &self.ctx, &st, Some(&verifier))?;
                    let ms = timed(&self.ctx, &st, || ptrs.iter().try_for_each(call))?;
                    times.warm_us.push(ms * 1e3 / sets as f64);
                } else {
                    let mut cold = 0.0;
                    for b in &ptrs {
                        L2Flush::flush(&mut self.flush, &self.ctx, &st, Some(&verifier))?;
                        cold += timed(&self.ctx, &st, || call(b))?;
                    }
                    times.cold_us.push(cold * 1e3 / sets as f64);
                }
                st.synchronize()
                    .map_err(driver(format!("timing {}", self.name())))?;
                for b in &bufs {
                    if let Some(breach) = b.breach(&st)? {
                        return Err(GateError::Reference(format!(
                            "{} wrote past a buffer while timed on {p} (repeat {r}): {breach}",
                            self.name()
                        )));
                    }
                }
                if r + 1 == seeds.len() {
                    for ((b, &seed), lse) in bufs.iter().zip(pass_seeds).zip(lses) {
                        let part = |i: usize| -> Result<Vec<u16>, GateError> {
                            let mut all = b.download(&st, i)?;
                            all.truncate(b.half[i].2);
                            Ok(all)
                        };
                        last.push(TimedLaunch {
                            seed,
                            lse,
                            dq: part(DQ)?,
                            dk: part(DK)?,
                            dv: part(DV)?,
                        });
                    }
                }
            }
        }
        Ok((times, last))
    }
}

/// Draws one call's Q, K, V, O and dO on the device from `seed` and poisons its outputs.
fn draw_call(
    verifier: &Verifier,
    st: &Arc<CudaStream>,
    p: &Problem,
    b: &mut CallBuffers,
    seed: u64,
) -> Result<(), GateError> {
    let h = |i: usize| ptr(&b.half[i].1, st);
    let mut jobs = DrawJob::inputs16(p, seed, 1.0, [h(Q), h(K), h(V)]).to_vec();
    for (dst, stream) in [(h(O), O_STREAM), (h(DO), D_O_STREAM)] {
        jobs.push(DrawJob {
            seed,
            n: p.q_elems() as u64,
            dst16: dst,
            scale: value_scale(1.0),
            tensor: stream,
            ..DrawJob::default()
        });
    }
    verifier.draw(p.dtype, &jobs)?;
    // The outputs are poisoned on the device, in the stream's order: a call that leaves
    // an element unwritten leaves the poison there for the check.
    let poison = poison_bits(p.dtype);
    for i in [DQ, DK, DV] {
        let n = b.half[i].2;
        // SAFETY: the buffer holds n elements before its guard, and the memset is queued
        // on the stream that every use of the buffer goes through.
        unsafe { sys::cuMemsetD16Async(h(i), poison, n, st.cu_stream()) }
            .result()
            .map_err(driver(format!("poisoning {}", NAMES[i])))?;
    }
    Ok(())
}

/// A plausible lse for timing: the log of the row's visible keys plus a drawn offset in
/// [0.25, 1.25) (+inf for a row that sees no key). The backward is a function of its
/// inputs whatever lse is; this keeps P = exp(s - lse) in the range real training
/// gives, so no launch is timed on overflowing or all-zero probabilities.
pub fn timing_lse(p: &Problem, seed: u64) -> Vec<f32> {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity((p.batch * p.heads * p.q_len) as usize);
    for _bh in 0..p.batch * p.heads {
        for i in 0..p.q_len {
            let keys = p.visible_keys(i);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 40) as f32 / (1u64 << 24) as f32;
            out.push(if keys.is_empty() {
                f32::INFINITY
            } else {
                (keys.len() as f32).ln() + 0.25 + u
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timing_lse_is_plausible_and_inf_where_no_key_is_seen() {
        let p: Problem = "1,2,5,3,64,f16,causal=br".parse().unwrap();
        let lse = timing_lse(&p, 7);
        assert_eq!(lse.len(), 10);
        // Lq 5 over Lk 3 bottom-right: rows 0 and 1 see no key.
        assert!(lse[0].is_infinite() && lse[1].is_infinite());
        for (i, &x) in lse.iter().enumerate().filter(|(i, _)| i % 5 >= 2) {
            let keys = (i % 5 - 1) as f32;
            assert!(x >= keys.ln() + 0.25 && x < keys.ln() + 1.25, "{i}: {x}");
        }
        assert_ne!(timing_lse(&p, 8), lse);
    }
}
