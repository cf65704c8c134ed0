//! The inputs of one backward launch: Q, K, V, O and dO as the kernel's 16-bit
//! elements, lse in fp32.
//!
//! Q, K and V are the forward's ([`Inputs::random`], bit for bit), so a backward case
//! and the forward case of the same seed see the same attention. dO is drawn by the
//! same Philox generator on a stream of its own: the counter word that names the
//! tensor is [`D_O_STREAM`] (Q, K, V are 0, 1, 2), which the device generator of
//! kernels/verify.cu takes as it is, so the device can draw the same dO. O and lse come
//! from the reference forward on those inputs (f32 math), O rounded to the element
//! type as a forward kernel would store it.

use super::forward::forward;
use crate::error::GateError;
use crate::inputs::{draw_stream, upcast, Inputs};
use evo_genome::Problem;
use rayon::prelude::*;

/// The Philox counter word of dO's stream (after Q = 0, K = 1, V = 2).
pub const D_O_STREAM: u32 = 3;

/// Q, K, V, O, dO and lse of one backward launch.
#[derive(Debug, Clone)]
pub struct BackwardInputs {
    pub problem: Problem,
    /// The seed every tensor was drawn from (O and lse follow from the others).
    pub seed: u64,
    /// The factor Q was drawn with (1 for ordinary cases).
    pub q_gain: f32,
    /// `[B, H, Lq, D]`, bits of the element type.
    pub q: Vec<u16>,
    /// `[B, Hkv, Lk, D]`.
    pub k: Vec<u16>,
    /// `[B, Hkv, Lk, D]`.
    pub v: Vec<u16>,
    /// The forward's output `[B, H, Lq, D]`, rounded to the element type.
    pub o: Vec<u16>,
    /// The incoming gradient `[B, H, Lq, D]`, unit variance.
    pub d_o: Vec<u16>,
    /// `[B, H, Lq]`: the natural-log log-sum-exp of each row's scaled scores, +inf
    /// for a row that sees no key (so that `exp(s - lse)` is 0 there).
    pub lse: Vec<f32>,
}

impl BackwardInputs {
    /// The inputs drawn from `seed`; Q is multiplied by `q_gain` as in
    /// [`Inputs::random`]. O and lse are computed here by the reference forward over
    /// every row, which costs B·H·Lq·Lk·D multiply-adds twice on the CPU.
    pub fn random(problem: &Problem, seed: u64, q_gain: f32) -> Result<BackwardInputs, GateError> {
        let inputs = Inputs::random(problem, seed, q_gain);
        let fwd = forward(&inputs)?;
        let dtype = problem.dtype;
        let o = fwd
            .o
            .par_iter()
            .map(|&x| crate::inputs::to_bits(dtype, x))
            .collect();
        let Inputs { q, k, v, .. } = inputs;
        Ok(BackwardInputs {
            problem: *problem,
            seed,
            q_gain,
            q,
            k,
            v,
            o,
            d_o: draw_stream(dtype, seed, D_O_STREAM, problem.q_elems(), 1.0),
            lse: fwd.lse,
        })
    }

    pub fn q_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.q)
    }
    pub fn k_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.k)
    }
    pub fn v_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.v)
    }
    pub fn o_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.o)
    }
    pub fn d_o_f32(&self) -> Vec<f32> {
        upcast(self.problem.dtype, &self.d_o)
    }

    /// Checks every tensor has the problem's size (the fields are public, so a caller
    /// may have built them by hand); the error names the field and the size it needs.
    pub fn check_sizes(&self) -> Result<(), GateError> {
        let p = &self.problem;
        let rows = p.batch as usize * p.heads as usize * p.q_len as usize;
        for (name, len, want) in [
            ("q", self.q.len(), p.q_elems()),
            ("k", self.k.len(), p.kv_elems()),
            ("v", self.v.len(), p.kv_elems()),
            ("o", self.o.len(), p.q_elems()),
            ("d_o", self.d_o.len(), p.q_elems()),
            ("lse", self.lse.len(), rows),
        ] {
            if len != want {
                return Err(GateError::Problem {
                    problem: p.spec(),
                    message: format!(
                        "backward input `{name}` holds {len} elements; the problem needs \
                         {want} (build the inputs with BackwardInputs::random)"
                    ),
                });
            }
        }
        Ok(())
    }
}
