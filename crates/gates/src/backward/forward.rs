//! The reference forward the backward's inputs come from: O and lse of every row, by
//! candle on the CPU (f32 math on the upcast inputs, the forward gates' reference
//! with the log-sum-exp kept).
//!
//! Rows are computed in blocks (of 256) so a block of scores stays small whatever
//! Lk is. A row that sees no key gets O = 0 and lse = +inf (FlashAttention's
//! convention, so that the backward's `exp(s - lse)` is 0 on it).

use super::reference::{candle_err, dims, matrix, select, visible, BLOCK};
use crate::error::GateError;
use crate::inputs::Inputs;
use candle_core::{Device, Tensor};

/// The forward's output and log-sum-exp for every row.
#[derive(Debug, Clone)]
pub struct Forward {
    /// `[B, H, Lq, D]`, zeros for a row that sees no key.
    pub o: Vec<f32>,
    /// `[B, H, Lq]`, natural log, +inf for a row that sees no key.
    pub lse: Vec<f32>,
}

/// O and lse of every row, by candle on the upcast inputs.
pub fn forward(inputs: &Inputs) -> Result<Forward, GateError> {
    forward_rows(inputs).map_err(candle_err)
}

fn forward_rows(inputs: &Inputs) -> candle_core::Result<Forward> {
    let p = &inputs.problem;
    let (lq, lk, d, scale) = dims(p);
    let (q, k, v) = (inputs.q_f32(), inputs.k_f32(), inputs.v_f32());
    let seen = visible(p);
    let heads = (p.batch * p.heads) as usize;
    let mut o = vec![0f32; heads * lq * d];
    let mut lse = vec![f32::INFINITY; heads * lq];
    for bh in 0..heads {
        let kvh = p.kv_head(bh);
        let kh = matrix(&k[kvh * lk * d..(kvh + 1) * lk * d], lk, d)?;
        let vh = matrix(&v[kvh * lk * d..(kvh + 1) * lk * d], lk, d)?;
        let kt = kh.t()?;
        for start in (0..lq).step_by(BLOCK) {
            let end = (start + BLOCK).min(lq);
            let qb = matrix(
                &q[(bh * lq + start) * d..(bh * lq + end) * d],
                end - start,
                d,
            )?;
            let s = qb.matmul(&kt)?.affine(scale, 0.0)?;
            let s = if p.masked() {
                // A row that sees no key keeps key 0 here (a finite softmax); its O
                // stays zero and its lse +inf below.
                let keep: Vec<u8> = seen[start..end]
                    .iter()
                    .flat_map(|r| {
                        let r = if r.is_empty() { 0..1 } else { r.clone() };
                        (0..lk).map(move |j| u8::from(r.contains(&j)))
                    })
                    .collect();
                let keep = Tensor::from_vec(keep, (end - start, lk), &Device::Cpu)?;
                select(&s, &keep, f32::NEG_INFINITY)?
            } else {
                s
            };
            let m = s.max_keepdim(1)?;
            let e = s.broadcast_sub(&m)?.exp()?;
            let l = e.sum_keepdim(1)?;
            let ob = e
                .broadcast_div(&l)?
                .matmul(&vh)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            let lb = (m + l.log()?)?.flatten_all()?.to_vec1::<f32>()?;
            for (r, i) in (start..end).enumerate() {
                if !seen[i].is_empty() {
                    o[(bh * lq + i) * d..(bh * lq + i + 1) * d]
                        .copy_from_slice(&ob[r * d..(r + 1) * d]);
                    lse[bh * lq + i] = lb[r];
                }
            }
        }
    }
    Ok(Forward { o, lse })
}
