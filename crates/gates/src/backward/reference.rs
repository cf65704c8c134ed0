//! The backward's reference: candle-core on the CPU, f32 math on the upcast inputs.
//!
//! The gradients follow the spec of kernels/attention_bwd.cu, with O and lse taken as
//! given (from [`super::forward`] by [`BackwardInputs::random`], or a caller's):
//!
//! ```text
//! S = Q Kᵀ·scale (masked: excluded)   P = exp(S − lse) (0 where masked)
//! dpsum_i = Σ_d dO[i,d]·O[i,d]        dP = dO Vᵀ      dS = P ∘ (dP − dpsum)
//! dV = Pᵀ dO    dK = scale·dSᵀ Q      dQ = scale·dS K
//! ```
//!
//! summed over the query heads of a K/V head for dK and dV. Since lse is an input, P
//! needs no row softmax: a dQ row needs its row of S (Lk·D), and a dK / dV row (a key)
//! only its column of S over the group's query rows (Lq·D per query head), so any set
//! of rows of either kind is computed on its own ([`backward_rows`]) and large problems
//! are checked on a sample ([`sampled_gradients`]). Masked entries are selected away
//! rather than multiplied by 0 (a masked score's exp may overflow against its row's
//! lse, and inf·0 is NaN); a row that sees no key has lse = +inf, so its P is 0.

use super::inputs::BackwardInputs;
use super::sample::{sample_key_rows, sample_query_rows};
use crate::error::GateError;
use candle_core::{Device, Tensor};
use evo_genome::Problem;
use std::ops::Range;

/// Query rows or keys per candle product: a block of scores holds at most BLOCK·L
/// floats, whatever the problem's length.
pub(super) const BLOCK: usize = 256;

/// The gradients of every row: dQ `[B, H, Lq, D]`, dK and dV `[B, Hkv, Lk, D]`.
#[derive(Debug, Clone)]
pub struct Gradients {
    pub dq: Vec<f32>,
    pub dk: Vec<f32>,
    pub dv: Vec<f32>,
}

/// Some rows of one head's gradient: `rows[r]` is a query (dQ) or a key (dK, dV),
/// `values[r·D..(r+1)·D]` its row.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadRows {
    pub rows: Vec<u32>,
    pub values: Vec<f32>,
}

/// The gradient rows a check computed: `dq` per query head (`b·H + h`), `dk` and `dv`
/// per K/V head (`b·Hkv + g`, the same keys in both).
#[derive(Debug, Clone)]
pub struct SampledGradients {
    pub dq: Vec<HeadRows>,
    pub dk: Vec<HeadRows>,
    pub dv: Vec<HeadRows>,
}

impl SampledGradients {
    /// True when every query row and every key is computed.
    pub fn is_full(&self, problem: &Problem) -> bool {
        self.dq
            .iter()
            .all(|h| h.rows.len() == problem.q_len as usize)
            && self
                .dk
                .iter()
                .all(|h| h.rows.len() == problem.kv_len as usize)
    }

    /// Rows computed in all: dQ rows plus keys (each key gives a dK and a dV row).
    pub fn rows_checked(&self) -> usize {
        self.dq.iter().chain(&self.dk).map(|h| h.rows.len()).sum()
    }
}

pub(super) fn candle_err(e: candle_core::Error) -> GateError {
    GateError::Reference(e.to_string())
}

/// Lq, Lk, D and the scale 1/√D.
pub(super) fn dims(p: &Problem) -> (usize, usize, usize, f64) {
    let d = p.head_dim.get() as usize;
    (
        p.q_len as usize,
        p.kv_len as usize,
        d,
        1.0 / (d as f64).sqrt(),
    )
}

/// The keys each query sees (kernels/mask.cuh); empty for a row that sees none.
pub(super) fn visible(p: &Problem) -> Vec<Range<usize>> {
    (0..p.q_len)
        .map(|i| {
            let r = p.visible_keys(i);
            r.start as usize..r.end as usize
        })
        .collect()
}

pub(super) fn matrix(data: &[f32], rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    Tensor::from_slice(data, (rows, cols), &Device::Cpu)
}

/// `x` where `keep` (0/1, of x's shape) is 1, else `fill`: a select, so that a masked
/// entry meets no arithmetic (an exp that overflowed times 0 would be NaN).
pub(super) fn select(x: &Tensor, keep: &Tensor, fill: f32) -> candle_core::Result<Tensor> {
    let fill = Tensor::full(fill, x.shape(), x.device())?;
    keep.where_cond(x, &fill)
}

/// Rows `rows` of the `[L, D]` matrix that starts at row `base` of `src`.
fn gather(src: &[f32], base: usize, rows: &[u32], d: usize) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| &src[(base + r as usize) * d..(base + r as usize + 1) * d])
        .copied()
        .collect()
}

/// dQ, dK and dV of every row.
pub fn gradients(inputs: &BackwardInputs) -> Result<Gradients, GateError> {
    let p = &inputs.problem;
    let queries: Vec<u32> = (0..p.q_len).collect();
    let keys: Vec<u32> = (0..p.kv_len).collect();
    let rows = backward_rows(
        inputs,
        &vec![queries; (p.batch * p.heads) as usize],
        &vec![keys; (p.batch * p.kv_heads()) as usize],
    )?;
    let flat = |heads: Vec<HeadRows>| heads.into_iter().flat_map(|h| h.values).collect();
    Ok(Gradients {
        dq: flat(rows.dq),
        dk: flat(rows.dk),
        dv: flat(rows.dv),
    })
}

/// The gradient rows [`sample_query_rows`] and [`sample_key_rows`] pick (every row
/// below the size where sampling starts).
pub fn sampled_gradients(inputs: &BackwardInputs) -> Result<SampledGradients, GateError> {
    let p = &inputs.problem;
    let dq_rows: Vec<Vec<u32>> = (0..(p.batch * p.heads) as usize)
        .map(|bh| sample_query_rows(p, inputs.seed, bh))
        .collect();
    let dkv_rows: Vec<Vec<u32>> = (0..(p.batch * p.kv_heads()) as usize)
        .map(|g| sample_key_rows(p, inputs.seed, g))
        .collect();
    backward_rows(inputs, &dq_rows, &dkv_rows)
}

/// The dQ rows `dq_rows[b·H + h]` of each query head and the dK / dV rows (keys)
/// `dkv_rows[b·Hkv + g]` of each K/V head.
pub fn backward_rows(
    inputs: &BackwardInputs,
    dq_rows: &[Vec<u32>],
    dkv_rows: &[Vec<u32>],
) -> Result<SampledGradients, GateError> {
    inputs.check_sizes()?;
    let p = &inputs.problem;
    check_rows(
        p,
        "dq_rows",
        dq_rows,
        p.batch * p.heads,
        "query head",
        p.q_len,
    )?;
    check_rows(
        p,
        "dkv_rows",
        dkv_rows,
        p.batch * p.kv_heads(),
        "K/V head",
        p.kv_len,
    )?;
    let ctx = Context::new(inputs);
    let mut out = SampledGradients {
        dq: Vec::with_capacity(dq_rows.len()),
        dk: Vec::with_capacity(dkv_rows.len()),
        dv: Vec::with_capacity(dkv_rows.len()),
    };
    for (bh, rows) in dq_rows.iter().enumerate() {
        let values = ctx.dq(bh, rows).map_err(candle_err)?;
        out.dq.push(HeadRows {
            rows: rows.clone(),
            values,
        });
    }
    for (g, keys) in dkv_rows.iter().enumerate() {
        let (dk, dv) = ctx.dkv(g, keys).map_err(candle_err)?;
        out.dk.push(HeadRows {
            rows: keys.clone(),
            values: dk,
        });
        out.dv.push(HeadRows {
            rows: keys.clone(),
            values: dv,
        });
    }
    Ok(out)
}

/// One list per head, every row within the length: else an error naming the argument.
fn check_rows(
    p: &Problem,
    name: &str,
    lists: &[Vec<u32>],
    heads: u32,
    head: &str,
    len: u32,
) -> Result<(), GateError> {
    let err = |message: String| GateError::Problem {
        problem: p.spec(),
        message,
    };
    if lists.len() != heads as usize {
        return Err(err(format!(
            "`{name}` holds {} row lists; it needs one per {head}, {heads}",
            lists.len()
        )));
    }
    for (at, rows) in lists.iter().enumerate() {
        if let Some(r) = rows.iter().find(|&&r| r >= len) {
            return Err(err(format!(
                "`{name}[{at}]` names row {r}; rows run from 0 to {}",
                len - 1
            )));
        }
    }
    Ok(())
}

/// The upcast inputs and what every row shares: dpsum and the mask.
struct Context<'a> {
    p: &'a Problem,
    lse: &'a [f32],
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    d_o: Vec<f32>,
    /// `[B, H, Lq]`: Σ_d dO·O of each row, with O as given.
    dpsum: Vec<f32>,
    seen: Vec<Range<usize>>,
}

impl<'a> Context<'a> {
    fn new(inputs: &'a BackwardInputs) -> Context<'a> {
        let d = inputs.problem.head_dim.get() as usize;
        let d_o = inputs.d_o_f32();
        let dpsum = d_o
            .chunks(d)
            .zip(inputs.o_f32().chunks(d))
            .map(|(g, o)| g.iter().zip(o).map(|(g, o)| g * o).sum())
            .collect();
        Context {
            p: &inputs.problem,
            lse: &inputs.lse,
            q: inputs.q_f32(),
            k: inputs.k_f32(),
            v: inputs.v_f32(),
            d_o,
            dpsum,
            seen: visible(&inputs.problem),
        }
    }

    /// dQ rows `rows` of query head `bh`: scale·dS K with dS over all of the head's keys.
    fn dq(&self, bh: usize, rows: &[u32]) -> candle_core::Result<Vec<f32>> {
        let (lq, lk, d, scale) = dims(self.p);
        let kvh = self.p.kv_head(bh);
        let kh = matrix(&self.k[kvh * lk * d..(kvh + 1) * lk * d], lk, d)?;
        let vh = matrix(&self.v[kvh * lk * d..(kvh + 1) * lk * d], lk, d)?;
        let (kt, vt) = (kh.t()?, vh.t()?);
        let mut out = Vec::with_capacity(rows.len() * d);
        for block in rows.chunks(BLOCK) {
            let n = block.len();
            let per_row = |x: &[f32]| -> candle_core::Result<Tensor> {
                let col: Vec<f32> = block.iter().map(|&i| x[bh * lq + i as usize]).collect();
                Tensor::from_vec(col, (n, 1), &Device::Cpu)
            };
            let qr = matrix(&gather(&self.q, bh * lq, block, d), n, d)?;
            let dor = matrix(&gather(&self.d_o, bh * lq, block, d), n, d)?;
            let s = qr.matmul(&kt)?.affine(scale, 0.0)?;
            let pm = s.broadcast_sub(&per_row(self.lse)?)?.exp()?;
            let pm = if self.p.masked() {
                let keep: Vec<u8> = block
                    .iter()
                    .flat_map(|&i| {
                        let r = &self.seen[i as usize];
                        (0..lk).map(move |j| u8::from(r.contains(&j)))
                    })
                    .collect();
                select(&pm, &Tensor::from_vec(keep, (n, lk), &Device::Cpu)?, 0.0)?
            } else {
                pm
            };
            let dp = dor.matmul(&vt)?;
            let ds = (pm * dp.broadcast_sub(&per_row(&self.dpsum)?)?)?;
            out.extend(
                ds.matmul(&kh)?
                    .affine(scale, 0.0)?
                    .flatten_all()?
                    .to_vec1::<f32>()?,
            );
        }
        Ok(out)
    }

    /// dK and dV rows `keys` of K/V head `g`: sums over the group's query heads of
    /// scale·dSᵀ Q and Pᵀ dO, with Sᵀ's rows (the keys' columns of S) over every query.
    fn dkv(&self, g: usize, keys: &[u32]) -> candle_core::Result<(Vec<f32>, Vec<f32>)> {
        let (lq, lk, d, scale) = dims(self.p);
        let (heads, group) = (self.p.heads as usize, self.p.group() as usize);
        let hkv = self.p.kv_heads() as usize;
        let first = g / hkv * heads + g % hkv * group;
        let dev = Device::Cpu;
        // Per query head of the group: Q, dO, and lse, dpsum as a row over the queries.
        let mut per_head = Vec::with_capacity(group);
        for bh in first..first + group {
            let (rows, at) = (bh * lq * d..(bh + 1) * lq * d, bh * lq..(bh + 1) * lq);
            per_head.push((
                matrix(&self.q[rows.clone()], lq, d)?,
                matrix(&self.d_o[rows], lq, d)?,
                Tensor::from_slice(&self.lse[at.clone()], (1, lq), &dev)?,
                Tensor::from_slice(&self.dpsum[at], (1, lq), &dev)?,
            ));
        }
        let (mut dk, mut dv) = (
            Vec::with_capacity(keys.len() * d),
            Vec::with_capacity(keys.len() * d),
        );
        for block in keys.chunks(BLOCK) {
            let n = block.len();
            let kc = matrix(&gather(&self.k, g * lk, block, d), n, d)?;
            let vc = matrix(&gather(&self.v, g * lk, block, d), n, d)?;
            let keep = if self.p.masked() {
                let keep: Vec<u8> = block
                    .iter()
                    .flat_map(|&j| {
                        let j = j as usize;
                        self.seen.iter().map(move |r| u8::from(r.contains(&j)))
                    })
                    .collect();
                Some(Tensor::from_vec(keep, (n, lq), &dev)?)
            } else {
                None
            };
            let mut dkb = Tensor::zeros((n, d), candle_core::DType::F32, &dev)?;
            let mut dvb = dkb.clone();
            for (qh, doh, lse, dpsum) in &per_head {
                let st = kc.matmul(&qh.t()?)?.affine(scale, 0.0)?;
                let pt = st.broadcast_sub(lse)?.exp()?;
                let pt = match &keep {
                    Some(keep) => select(&pt, keep, 0.0)?,
                    None => pt,
                };
                let dpt = vc.matmul(&doh.t()?)?;
                let dst = (&pt * dpt.broadcast_sub(dpsum)?)?;
                dvb = (dvb + pt.matmul(doh)?)?;
                dkb = (dkb + dst.matmul(qh)?)?;
            }
            dk.extend(dkb.affine(scale, 0.0)?.flatten_all()?.to_vec1::<f32>()?);
            dv.extend(dvb.flatten_all()?.to_vec1::<f32>()?);
        }
        Ok((dk, dv))
    }
}
