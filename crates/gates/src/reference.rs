//! The reference attention: candle-core on the CPU, f32 math on the upcast inputs.
//!
//! `softmax(Q·Kᵀ·scale + mask)·V` per (b, h), top-left causal (query i sees keys
//! j <= i, as PyTorch's `is_causal`). For large shapes only a sample of query rows is
//! computed per (b, h) — always the first and the last row (the last one lives in
//! the partial tile when Lq is not a multiple of the tile), the middle row, and
//! random others — so a check stays cheap while every (b, h) is still looked at.

use crate::error::GateError;
use crate::inputs::Inputs;
use candle_core::{Device, Tensor};
use evo_genome::Problem;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Below this many multiply-adds (B·H·Lq·Lk·D) every row is computed.
pub const FULL_REFERENCE_MACS: u64 = 1 << 27;
/// Rows compared per (b, h) when sampling (first, middle and last included).
pub const SAMPLED_ROWS: usize = 48;

/// Reference rows of one (b, h): `rows[i]` is a query index, `out[i·D..(i+1)·D]` its
/// output and `lse[i]` its log-sum-exp (natural log of the sum of exp(scaled score)
/// over the keys it sees; +inf for a row that sees none, FlashAttention's convention).
#[derive(Debug, Clone)]
pub struct HeadReference {
    pub rows: Vec<u32>,
    pub out: Vec<f32>,
    pub lse: Vec<f32>,
}

/// The reference outputs of one launch, one entry per (b, h) in `b·H + h` order.
#[derive(Debug, Clone)]
pub struct Reference {
    pub heads: Vec<HeadReference>,
    /// Largest |score| seen (after scaling); the large-logit cases assert it exceeds 100.
    pub max_abs_score: f32,
}

impl Reference {
    /// True when every query row is compared.
    pub fn is_full(&self, problem: &Problem) -> bool {
        self.heads
            .iter()
            .all(|h| h.rows.len() == problem.q_len as usize)
    }

    pub fn rows_checked(&self) -> usize {
        self.heads.iter().map(|h| h.rows.len()).sum()
    }
}

/// The query rows a reference covers for one (b, h).
pub fn sample_rows(problem: &Problem, seed: u64, bh: usize) -> Vec<u32> {
    spread_rows(
        problem,
        problem.q_len as usize,
        seed ^ (bh as u64).wrapping_mul(0xA24B_AED4_963E_E407),
    )
}

/// Which of `len` rows a check of `problem` covers: every row below
/// [`FULL_REFERENCE_MACS`], else the first, middle and last (the last lives in the
/// partial tile) and random others drawn from `rng_seed`, [`SAMPLED_ROWS`] in all.
pub(crate) fn spread_rows(problem: &Problem, len: usize, rng_seed: u64) -> Vec<u32> {
    if problem.macs() <= FULL_REFERENCE_MACS || len <= SAMPLED_ROWS {
        return (0..len as u32).collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(rng_seed);
    let mut rows: Vec<u32> = vec![0, (len / 2) as u32, (len - 1) as u32];
    for r in sample(&mut rng, len, SAMPLED_ROWS) {
        if rows.len() == SAMPLED_ROWS {
            break;
        }
        if !rows.contains(&(r as u32)) {
            rows.push(r as u32);
        }
    }
    rows.sort_unstable();
    rows
}

fn candle_err(e: candle_core::Error) -> GateError {
    GateError::Reference(e.to_string())
}

/// Rows per (b, h) that FAST holds the device reference to candle's on, and the most
/// rows in all (a large B·H gets fewer per head).
pub const CROSS_CHECK_ROWS: usize = 8;
pub const CROSS_CHECK_TOTAL: usize = 256;
/// The most (b, h) a cross-check reads: a decode batch has thousands, each a K/V head of
/// up to gigabytes, which a host reference of every one would take minutes to compute.
pub const CROSS_CHECK_HEADS: usize = 32;
/// The most elements of K (and as many of V) the host draws for a cross-check's heads,
/// past those of its first, last and whole group: at a long context each K/V head is
/// large (Lk 131072 at D128: 2^24 elements), and 32 query heads can read 8 of them.
pub const CROSS_CHECK_KV_ELEMS: u64 = 1 << 25;

/// The (b, h) a cross-check of the device reference compares, ascending: every one up
/// to [`CROSS_CHECK_HEADS`] while their K/V heads fit [`CROSS_CHECK_KV_ELEMS`]; past
/// either, the first and the last, every query head of one K/V head's group (the
/// device reference's grouped passes), and random others whose K/V heads fit the bound
/// (or are drawn already), the group and the others drawn from `seed` (a launch's), so
/// that each launch looks at other heads.
pub fn cross_check_heads(problem: &Problem, seed: u64) -> Vec<usize> {
    let heads = (problem.batch * problem.heads) as usize;
    let group = problem.group() as usize;
    // How many (b, K/V head) fit the bound ([`Problem::kv_head`]: the one a query head reads).
    let kv_head_elems = (problem.kv_len as u64 * problem.head_dim.get() as u64).max(1);
    let kv_fit = (CROSS_CHECK_KV_ELEMS / kv_head_elems).max(1) as usize;
    if heads <= CROSS_CHECK_HEADS && heads.div_ceil(group) <= kv_fit {
        return (0..heads).collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4845_4144_5321);
    let whole = group.clamp(1, CROSS_CHECK_HEADS / 2);
    let first = rng.random_range(0..heads / whole) * whole;
    let mut chosen: Vec<usize> = [0, heads - 1]
        .into_iter()
        .chain(first..first + whole)
        .collect();
    chosen.sort_unstable();
    chosen.dedup();
    let mut kv: Vec<usize> = chosen.iter().map(|&bh| problem.kv_head(bh)).collect();
    kv.dedup();
    for h in sample(&mut rng, heads, heads.min(4 * CROSS_CHECK_HEADS)) {
        if chosen.len() >= CROSS_CHECK_HEADS {
            break;
        }
        if chosen.contains(&h) {
            continue;
        }
        let kv_h = problem.kv_head(h);
        let new_kv = !kv.contains(&kv_h);
        if new_kv && kv.len() >= kv_fit {
            continue;
        }
        if new_kv {
            kv.push(kv_h);
        }
        chosen.push(h);
    }
    chosen.sort_unstable();
    chosen
}

/// The rows of each (b, h), in `b·H + h` order, that a cross-check of the device
/// reference compares: none for a head [`cross_check_heads`] leaves out; else the last
/// (the partial tile), the first and middle when there is room, and random others.
pub fn cross_check_rows(problem: &Problem, seed: u64) -> Vec<Vec<u32>> {
    let chosen = cross_check_heads(problem, seed);
    let lq = problem.q_len as usize;
    let n = (CROSS_CHECK_TOTAL / chosen.len())
        .clamp(1, CROSS_CHECK_ROWS)
        .min(lq);
    let mut per_head = vec![Vec::new(); (problem.batch * problem.heads) as usize];
    for &bh in &chosen {
        let mut rng =
            ChaCha8Rng::seed_from_u64(seed ^ 0xC0FF_EE00 ^ (bh as u64).wrapping_mul(0x9E37_79B9));
        let rows = &mut per_head[bh];
        for r in [lq - 1, 0, lq / 2]
            .into_iter()
            .chain(sample(&mut rng, lq, n))
        {
            if rows.len() == n {
                break;
            }
            if !rows.contains(&(r as u32)) {
                rows.push(r as u32);
            }
        }
        rows.sort_unstable();
    }
    per_head
}

/// Computes the reference for the rows [`sample_rows`] picks.
pub fn reference(inputs: &Inputs) -> Result<Reference, GateError> {
    reference_at(inputs, |bh| sample_rows(&inputs.problem, inputs.seed, bh))
}

/// Computes the reference for the rows `rows_of(bh)` names in each (b, h).
pub fn reference_at(
    inputs: &Inputs,
    rows_of: impl Fn(usize) -> Vec<u32>,
) -> Result<Reference, GateError> {
    let p = &inputs.problem;
    let (lq, lk, d) = (
        p.q_len as usize,
        p.kv_len as usize,
        p.head_dim.get() as usize,
    );
    let scale = 1.0 / (d as f64).sqrt();
    let dev = Device::Cpu;
    let upcast = |bits: &[u16]| crate::inputs::upcast(p.dtype, bits);
    let mut heads = Vec::with_capacity((p.batch * p.heads) as usize);
    let mut max_abs_score = 0f32;
    let mut kv: Option<(usize, Tensor, Tensor)> = None;
    for bh in 0..(p.batch * p.heads) as usize {
        let rows = rows_of(bh);
        // A head with no row asked for is not read at all (a cross-check of a decode
        // batch looks at a few heads of thousands).
        if rows.is_empty() {
            heads.push(HeadReference {
                rows,
                out: Vec::new(),
                lse: Vec::new(),
            });
            continue;
        }
        let kvh = p.kv_head(bh);
        let q = upcast(&inputs.q[bh * lq * d..(bh + 1) * lq * d]);
        let qh = Tensor::from_vec(q, (lq, d), &dev).map_err(candle_err)?;
        // The query heads of a group are consecutive: their K/V head is upcast once.
        let (kh, vh) = match &kv {
            Some((h, kh, vh)) if *h == kvh => (kh.clone(), vh.clone()),
            _ => {
                let head = |t: &[u16]| {
                    Tensor::from_vec(upcast(&t[kvh * lk * d..(kvh + 1) * lk * d]), (lk, d), &dev)
                        .map_err(candle_err)
                };
                let (kh, vh) = (head(&inputs.k)?, head(&inputs.v)?);
                kv = Some((kvh, kh.clone(), vh.clone()));
                (kh, vh)
            }
        };
        let idx = Tensor::from_slice(&rows, rows.len(), &dev).map_err(candle_err)?;
        let q_rows = qh.index_select(&idx, 0).map_err(candle_err)?;
        let scores = q_rows
            .matmul(&kh.t().map_err(candle_err)?)
            .and_then(|s| s.affine(scale, 0.0))
            .map_err(candle_err)?;
        let abs_max = scores
            .abs()
            .and_then(|a| a.flatten_all())
            .and_then(|a| a.max(0))
            .and_then(|a| a.to_scalar::<f32>())
            .map_err(candle_err)?;
        max_abs_score = max_abs_score.max(abs_max);
        // A row that sees no key is all -inf; it is given key 0 here (a finite softmax)
        // and its output zeroed below, as the kernels define it.
        let visible: Vec<std::ops::Range<usize>> = rows
            .iter()
            .map(|&i| {
                let r = p.visible_keys(i);
                r.start as usize..r.end as usize
            })
            .collect();
        let scores = if p.masked() {
            let mask: Vec<f32> = visible
                .iter()
                .flat_map(|r| {
                    let r = if r.is_empty() { 0..1 } else { r.clone() };
                    (0..lk).map(move |j| {
                        if r.contains(&j) {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                })
                .collect();
            let mask = Tensor::from_vec(mask, (rows.len(), lk), &dev).map_err(candle_err)?;
            (scores + mask).map_err(candle_err)?
        } else {
            scores
        };
        let (prob, mut lse) = softmax_rows(&scores).map_err(candle_err)?;
        let mut out = prob
            .matmul(&vh)
            .and_then(|o| o.flatten_all())
            .and_then(|o| o.to_vec1::<f32>())
            .map_err(candle_err)?;
        for (r, keys) in visible.iter().enumerate() {
            if keys.is_empty() {
                out[r * d..(r + 1) * d].fill(0.0);
                lse[r] = f32::INFINITY;
            }
        }
        heads.push(HeadReference { rows, out, lse });
    }
    Ok(Reference {
        heads,
        max_abs_score,
    })
}

/// Row softmax with the running max subtracted (every row holds a key unmasked, so
/// the max is finite), and each row's log-sum-exp, `m + ln l`.
fn softmax_rows(s: &Tensor) -> candle_core::Result<(Tensor, Vec<f32>)> {
    let m = s.max_keepdim(1)?;
    let e = s.broadcast_sub(&m)?.exp()?;
    let l = e.sum_keepdim(1)?;
    let lse = (&m + l.log()?)?.flatten_all()?.to_vec1::<f32>()?;
    Ok((e.broadcast_div(&l)?, lse))
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_genome::{Dtype, HeadDim};

    /// The plain f64 loop the candle reference is checked against, with the mask and
    /// the K/V head written out from kernels/ABI.md's words (not from `visible_keys`).
    fn naive(inputs: &Inputs, bh: usize, row: usize) -> Vec<f64> {
        naive_with_lse(inputs, bh, row).0
    }

    /// [`naive`] and the row's log-sum-exp (+inf for a row that sees no key).
    fn naive_with_lse(inputs: &Inputs, bh: usize, row: usize) -> (Vec<f64>, f64) {
        let p = &inputs.problem;
        let (lq, lk, d) = (
            p.q_len as usize,
            p.kv_len as usize,
            p.head_dim.get() as usize,
        );
        let (q, k, v) = (inputs.q_f32(), inputs.k_f32(), inputs.v_f32());
        let scale = 1.0 / (d as f64).sqrt();
        let (h, group) = (p.heads as usize, (p.heads / p.kv_heads()) as usize);
        let kvh = (bh / h) * (h / group) + (bh % h) / group;
        let qr = &q[(bh * lq + row) * d..(bh * lq + row + 1) * d];
        let diag = row as i64
            + match p.align {
                evo_genome::MaskAlign::TopLeft => 0,
                evo_genome::MaskAlign::BottomRight => lk as i64 - lq as i64,
            };
        let sees = |j: usize| {
            let j = j as i64;
            (!p.causal || j <= diag)
                && p.window_left.is_none_or(|w| j >= diag - w as i64)
                && p.window_right.is_none_or(|w| j <= diag + w as i64)
        };
        let keys: Vec<usize> = (0..lk).filter(|&j| sees(j)).collect();
        if keys.is_empty() {
            return (vec![0.0; d], f64::INFINITY);
        }
        let s: Vec<f64> = keys
            .iter()
            .map(|&j| {
                let kr = &k[(kvh * lk + j) * d..(kvh * lk + j + 1) * d];
                qr.iter()
                    .zip(kr)
                    .map(|(a, b)| *a as f64 * *b as f64)
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let l: f64 = e.iter().sum();
        let out = (0..d)
            .map(|c| {
                keys.iter()
                    .zip(&e)
                    .map(|(&j, e)| e * v[(kvh * lk + j) * d + c] as f64)
                    .sum::<f64>()
                    / l
            })
            .collect();
        (out, m + l.ln())
    }

    fn problem(
        b: u32,
        h: u32,
        lq: u32,
        lk: u32,
        d: HeadDim,
        dtype: Dtype,
        causal: bool,
    ) -> Problem {
        Problem {
            batch: b,
            heads: h,
            q_len: lq,
            kv_len: lk,
            head_dim: d,
            dtype,
            causal,
            ..Problem::seed()
        }
    }

    #[test]
    fn candle_reference_matches_an_f64_loop_on_small_shapes() {
        let shapes = [
            problem(1, 2, 7, 7, HeadDim::D64, Dtype::F16, false),
            problem(2, 1, 5, 9, HeadDim::D64, Dtype::Bf16, true),
            problem(1, 3, 9, 4, HeadDim::D128, Dtype::F16, true),
            problem(1, 1, 33, 17, HeadDim::D128, Dtype::Bf16, false),
            // Grouped heads, both alignments, windows, rows that see no key.
            "2,6,9,13,64,f16,causal=br,kv=2".parse().unwrap(),
            "1,4,12,5,64,bf16,causal=br,kv=1".parse().unwrap(),
            "1,2,20,20,128,f16,causal,window=3:".parse().unwrap(),
            "1,3,11,17,64,f16,window=2:4,align=br,kv=1".parse().unwrap(),
            "1,2,16,6,64,f16,window=1:0".parse().unwrap(),
        ];
        for (n, p) in shapes.iter().enumerate() {
            let inputs = Inputs::random(p, 100 + n as u64, 1.0);
            let r = reference(&inputs).unwrap();
            assert!(r.is_full(p));
            let d = p.head_dim.get() as usize;
            for (bh, head) in r.heads.iter().enumerate() {
                for (i, &row) in head.rows.iter().enumerate() {
                    let (want, lse) = naive_with_lse(&inputs, bh, row as usize);
                    let got_lse = head.lse[i] as f64;
                    assert!(
                        got_lse == lse || (got_lse - lse).abs() < 1e-5 * lse.abs().max(1.0),
                        "{p} bh {bh} row {row} lse: {got_lse} vs {lse}"
                    );
                    let got = &head.out[i * d..(i + 1) * d];
                    for (c, (g, w)) in got.iter().zip(&want).enumerate() {
                        let g = *g as f64;
                        assert!(
                            (g - w).abs() < 2e-5,
                            "{p} bh {bh} row {row} col {c}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rows_that_see_no_key_are_zeros() {
        // Bottom-right causal with Lq > Lk: rows 0..7 see no key.
        let p: Problem = "1,2,12,5,64,f16,causal=br".parse().unwrap();
        let r = reference(&Inputs::random(&p, 5, 1.0)).unwrap();
        for head in &r.heads {
            assert!(head.out[..7 * 64].iter().all(|&x| x == 0.0));
            assert!(head.out[7 * 64..].iter().any(|&x| x != 0.0));
            // Their lse is +inf (FlashAttention's convention), the others' finite.
            assert!(head.lse[..7].iter().all(|&x| x == f32::INFINITY));
            assert!(head.lse[7..].iter().all(|x| x.is_finite()));
        }
    }

    #[test]
    fn large_shapes_sample_rows_including_first_middle_and_last() {
        let p = problem(2, 4, 1000, 1000, HeadDim::D128, Dtype::F16, true);
        let rows = sample_rows(&p, 9, 3);
        assert_eq!(rows.len(), SAMPLED_ROWS);
        assert!(rows.contains(&0) && rows.contains(&500) && rows.contains(&999));
        assert_ne!(
            rows,
            sample_rows(&p, 9, 4),
            "each (b, h) gets its own sample"
        );
        let inputs = Inputs::random(&p, 9, 1.0);
        let r = reference(&inputs).unwrap();
        assert!(!r.is_full(&p));
        assert_eq!(r.rows_checked(), 8 * SAMPLED_ROWS);
        let head = &r.heads[5];
        let d = 128;
        let last = head.rows.iter().position(|&x| x == 999).unwrap();
        let want = naive(&inputs, 5, 999);
        for (g, w) in head.out[last * d..(last + 1) * d].iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 2e-5);
        }
    }

    #[test]
    fn q_gain_drives_scores_past_the_exp_overflow() {
        let p = problem(1, 1, 64, 300, HeadDim::D64, Dtype::F16, false);
        let r = reference(&Inputs::random(&p, 3, 40.0)).unwrap();
        assert!(r.max_abs_score > 100.0, "max |s| {}", r.max_abs_score);
        assert!(r.heads[0].out.iter().all(|x| x.is_finite()));
    }

    /// A decode batch of grouped heads, as FAST's cross-check sees one.
    fn decode_batch() -> Problem {
        Problem {
            kv_heads: Some(8),
            align: evo_genome::MaskAlign::BottomRight,
            ..problem(4, 32, 1, 96, HeadDim::D64, Dtype::Bf16, true)
        }
    }

    #[test]
    fn a_cross_check_reads_a_bounded_set_of_heads_with_a_whole_group() {
        let small = problem(2, 16, 64, 64, HeadDim::D64, Dtype::F16, false);
        assert_eq!(cross_check_heads(&small, 1), (0..32).collect::<Vec<_>>());
        let p = decode_batch();
        let heads = 128;
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..20u64 {
            let chosen = cross_check_heads(&p, seed);
            assert_eq!(chosen.len(), CROSS_CHECK_HEADS, "{chosen:?}");
            assert!(
                chosen.windows(2).all(|w| w[0] < w[1]),
                "ascending, distinct"
            );
            assert!(chosen.contains(&0) && chosen.contains(&(heads - 1)));
            // Every query head of some K/V head's group (4 query heads a group).
            assert!(
                (0..heads / 4).any(|g| (4 * g..4 * g + 4).all(|h| chosen.contains(&h))),
                "{chosen:?}"
            );
            // Rows only in the chosen heads (one each: Lq is 1).
            let per_head = cross_check_rows(&p, seed);
            for (bh, rows) in per_head.iter().enumerate() {
                assert_eq!(rows.is_empty(), !chosen.contains(&bh));
                assert!(rows.iter().all(|&r| r < p.q_len));
            }
            seen.extend(chosen);
        }
        assert!(
            seen.len() > 64,
            "launches look at other heads: {}",
            seen.len()
        );
    }

    #[test]
    fn a_cross_check_at_a_long_context_draws_a_bounded_number_of_kv_heads() {
        let long = |b: u32, lk: u32| Problem {
            kv_heads: Some(8),
            align: evo_genome::MaskAlign::BottomRight,
            ..problem(b, 32, 1, lk, HeadDim::D128, Dtype::F16, true)
        };
        // Lk 131072 at D128: 2^24 elements a K/V head, two fit the bound; the first,
        // the last and a whole group may read a third. 32 heads, all of them read before.
        let p = long(1, 131072);
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..20u64 {
            let chosen = cross_check_heads(&p, seed);
            let mut kv: Vec<usize> = chosen.iter().map(|&bh| p.kv_head(bh)).collect();
            kv.dedup();
            assert!(kv.len() <= 3, "{chosen:?} reads K/V heads {kv:?}");
            assert!(chosen.contains(&0) && chosen.contains(&31), "{chosen:?}");
            assert!(
                (0..8).any(|g| (4 * g..4 * g + 4).all(|h| chosen.contains(&h))),
                "{chosen:?}"
            );
            // Every query head of the K/V heads drawn is read: they cost nothing more.
            let of_drawn: Vec<usize> = (0..32).filter(|&h| kv.contains(&p.kv_head(h))).collect();
            assert_eq!(chosen, of_drawn);
            seen.extend(kv);
        }
        assert_eq!(seen.len(), 8, "launches look at other K/V heads: {seen:?}");
        // B64 Lk32768: eight K/V heads of 2^22 elements fit, of 512.
        let p = long(64, 32768);
        for seed in 0..20u64 {
            let chosen = cross_check_heads(&p, seed);
            let mut kv: Vec<usize> = chosen.iter().map(|&bh| p.kv_head(bh)).collect();
            kv.dedup();
            assert!(kv.len() <= 8, "{kv:?}");
            assert!(chosen.contains(&0) && chosen.contains(&(64 * 32 - 1)));
        }
        // Where the K/V heads are small the bound does not bind: every head up to 32.
        let short = long(1, 4096);
        assert_eq!(cross_check_heads(&short, 3), (0..32).collect::<Vec<_>>());
    }

    #[test]
    fn heads_drawn_alone_hold_the_whole_draws_values_and_reference() {
        let p = decode_batch();
        let seed = 77;
        let chosen = cross_check_heads(&p, seed);
        let whole = Inputs::random(&p, seed, 1.0);
        let part = Inputs::random_heads(&p, seed, 1.0, &chosen);
        let d = 64;
        let (q_head, kv_head) = (p.q_len as usize * d, p.kv_len as usize * d);
        for &bh in &chosen {
            let kvh = p.kv_head(bh);
            assert_eq!(
                whole.q[bh * q_head..(bh + 1) * q_head],
                part.q[bh * q_head..(bh + 1) * q_head]
            );
            assert_eq!(
                whole.k[kvh * kv_head..(kvh + 1) * kv_head],
                part.k[kvh * kv_head..(kvh + 1) * kv_head]
            );
            assert_eq!(
                whole.v[kvh * kv_head..(kvh + 1) * kv_head],
                part.v[kvh * kv_head..(kvh + 1) * kv_head]
            );
        }
        // Heads not chosen are left undrawn.
        let left_out = (0..128).find(|h| !chosen.contains(h)).unwrap();
        assert!(part.q[left_out * q_head..(left_out + 1) * q_head]
            .iter()
            .all(|&x| x == 0));
        let per_head = cross_check_rows(&p, seed);
        let rows = |bh: usize| per_head[bh].clone();
        let (a, b) = (
            reference_at(&whole, rows).unwrap(),
            reference_at(&part, rows).unwrap(),
        );
        assert_eq!(a.rows_checked(), b.rows_checked());
        assert!(a.rows_checked() > 0);
        for (x, y) in a.heads.iter().zip(&b.heads) {
            assert_eq!(x.rows, y.rows);
            assert_eq!(x.out, y.out, "the same values, bit for bit");
        }
    }
}
