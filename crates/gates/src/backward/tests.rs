//! The backward reference against plain float64 loops, and those loops against finite
//! differences of the loss L = Σ O ∘ dO (which checks the formulas themselves).

use super::inputs::D_O_STREAM;
use super::*;
use crate::inputs::{draw_stream, Inputs};
use crate::reference::SAMPLED_ROWS;
use evo_genome::{MaskAlign, Problem};

/// Query i sees key j, from kernels/ABI.md's words (not from `visible_keys`).
fn sees(p: &Problem, i: usize, j: usize) -> bool {
    let diag = i as i64
        + match p.align {
            MaskAlign::TopLeft => 0,
            MaskAlign::BottomRight => p.kv_len as i64 - p.q_len as i64,
        };
    let j = j as i64;
    (!p.causal || j <= diag)
        && p.window_left.is_none_or(|w| j >= diag - w as i64)
        && p.window_right.is_none_or(|w| j <= diag + w as i64)
}

/// The K/V head of flattened query head `bh`, written out.
fn kv_of(p: &Problem, bh: usize) -> usize {
    let (h, group) = (p.heads as usize, (p.heads / p.kv_heads()) as usize);
    (bh / h) * (h / group) + (bh % h) / group
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The tensors as f64, in the problem's layouts.
struct Exact {
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    d_o: Vec<f64>,
}

impl Exact {
    fn of(inputs: &BackwardInputs) -> Exact {
        let up = |x: Vec<f32>| x.into_iter().map(f64::from).collect();
        Exact {
            q: up(inputs.q_f32()),
            k: up(inputs.k_f32()),
            v: up(inputs.v_f32()),
            d_o: up(inputs.d_o_f32()),
        }
    }
}

/// O and lse in f64 (zeros and +inf for a row that sees no key).
fn naive_forward(p: &Problem, x: &Exact) -> (Vec<f64>, Vec<f64>) {
    let (lq, lk, d) = (
        p.q_len as usize,
        p.kv_len as usize,
        p.head_dim.get() as usize,
    );
    let scale = 1.0 / (d as f64).sqrt();
    let heads = (p.batch * p.heads) as usize;
    let (mut o, mut lse) = (vec![0.0; heads * lq * d], vec![f64::INFINITY; heads * lq]);
    for bh in 0..heads {
        let g = kv_of(p, bh);
        for i in 0..lq {
            let qi = &x.q[(bh * lq + i) * d..][..d];
            let keys: Vec<usize> = (0..lk).filter(|&j| sees(p, i, j)).collect();
            if keys.is_empty() {
                continue;
            }
            let s: Vec<f64> = keys
                .iter()
                .map(|&j| dot(qi, &x.k[(g * lk + j) * d..][..d]) * scale)
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let l: f64 = s.iter().map(|s| (s - m).exp()).sum();
            lse[bh * lq + i] = m + l.ln();
            for (&j, s) in keys.iter().zip(&s) {
                let w = (s - m).exp() / l;
                for c in 0..d {
                    o[(bh * lq + i) * d + c] += w * x.v[(g * lk + j) * d + c];
                }
            }
        }
    }
    (o, lse)
}

/// dQ, dK, dV by the spec's formulas in f64, O and lse as given.
fn naive_gradients(
    p: &Problem,
    x: &Exact,
    o: &[f64],
    lse: &[f64],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (lq, lk, d) = (
        p.q_len as usize,
        p.kv_len as usize,
        p.head_dim.get() as usize,
    );
    let scale = 1.0 / (d as f64).sqrt();
    let mut dq = vec![0.0; p.q_elems()];
    let (mut dk, mut dv) = (vec![0.0; p.kv_elems()], vec![0.0; p.kv_elems()]);
    for bh in 0..(p.batch * p.heads) as usize {
        let g = kv_of(p, bh);
        for i in 0..lq {
            let row = (bh * lq + i) * d..(bh * lq + i + 1) * d;
            let dpsum = dot(&x.d_o[row.clone()], &o[row.clone()]);
            for j in (0..lk).filter(|&j| sees(p, i, j)) {
                let key = (g * lk + j) * d..(g * lk + j + 1) * d;
                let s = dot(&x.q[row.clone()], &x.k[key.clone()]) * scale;
                let pij = (s - lse[bh * lq + i]).exp();
                let ds = pij * (dot(&x.d_o[row.clone()], &x.v[key.clone()]) - dpsum);
                for c in 0..d {
                    dv[key.start + c] += pij * x.d_o[row.start + c];
                    dk[key.start + c] += scale * ds * x.q[row.start + c];
                    dq[row.start + c] += scale * ds * x.k[key.start + c];
                }
            }
        }
    }
    (dq, dk, dv)
}

fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (n, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, ok) = (g as f64, (g as f64 - w).abs() <= tol * (1.0 + w.abs()));
        assert!(ok || (g.is_infinite() && g == w), "{what}[{n}]: {g} vs {w}");
    }
}

/// Every kind of problem the mask rule knows, small enough for the f64 loops.
fn shapes() -> Vec<Problem> {
    [
        "1,2,7,7,64,f16",
        "2,2,5,9,96,bf16,causal",
        "1,2,9,4,64,f16,causal",
        "1,4,9,13,64,f16,causal=br,kv=2",
        "1,4,12,5,96,bf16,causal=br,kv=1",
        "1,2,20,20,64,f16,causal,window=3:",
        "1,3,11,17,96,f16,window=2:4,align=br,kv=1",
        "1,2,16,6,64,bf16,window=1:0",
        "2,4,5,12,64,f16,window=0:0,kv=2",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

#[test]
fn forward_and_gradients_match_f64_loops_on_every_kind_of_problem() {
    for (n, p) in shapes().iter().enumerate() {
        let inputs = BackwardInputs::random(p, 40 + n as u64, 1.0).unwrap();
        let x = Exact::of(&inputs);
        let (o, lse) = naive_forward(p, &x);
        let spec = p.spec();
        let fwd = forward(&Inputs::random(p, 40 + n as u64, 1.0)).unwrap();
        assert_close(&format!("{spec} O"), &fwd.o, &o, 2e-5);
        assert_close(&format!("{spec} lse"), &inputs.lse, &lse, 2e-6);
        // The gradients take the inputs' rounded O and f32 lse as given.
        let o: Vec<f64> = inputs.o_f32().into_iter().map(f64::from).collect();
        let lse: Vec<f64> = inputs.lse.iter().map(|&x| x as f64).collect();
        let (dq, dk, dv) = naive_gradients(p, &x, &o, &lse);
        let got = gradients(&inputs).unwrap();
        assert_close(&format!("{spec} dQ"), &got.dq, &dq, 2e-5);
        assert_close(&format!("{spec} dK"), &got.dk, &dk, 2e-5);
        assert_close(&format!("{spec} dV"), &got.dv, &dv, 2e-5);
        assert!(sampled_gradients(&inputs).unwrap().is_full(p));
    }
}

fn tensor<'a>(x: &'a mut Exact, name: &str) -> &'a mut Vec<f64> {
    match name {
        "dQ" => &mut x.q,
        "dK" => &mut x.k,
        _ => &mut x.v,
    }
}

#[test]
fn the_formulas_are_the_derivative_of_o_dot_d_o() {
    // Grouped heads, bottom-right causal with Lq > Lk: rows 0 and 1 see no key.
    let p: Problem = "1,4,6,4,64,f16,causal=br,kv=2".parse().unwrap();
    let inputs = BackwardInputs::random(&p, 7, 1.0).unwrap();
    let mut x = Exact::of(&inputs);
    let loss = |x: &Exact| dot(&naive_forward(&p, x).0, &x.d_o);
    let (o, lse) = naive_forward(&p, &x);
    let (dq, dk, dv) = naive_gradients(&p, &x, &o, &lse);
    let eps = 1e-5;
    for (name, grad) in [("dQ", &dq), ("dK", &dk), ("dV", &dv)] {
        for (n, &want) in grad.iter().enumerate() {
            let x0 = tensor(&mut x, name)[n];
            tensor(&mut x, name)[n] = x0 + eps;
            let up = loss(&x);
            tensor(&mut x, name)[n] = x0 - eps;
            let down = loss(&x);
            tensor(&mut x, name)[n] = x0;
            let fd = (up - down) / (2.0 * eps);
            assert!(
                (fd - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "{name}[{n}]: formula {want} vs finite difference {fd}"
            );
        }
    }
    let (lq, d) = (6, 64);
    for bh in 0..4 {
        assert!(dq[bh * lq * d..(bh * lq + 2) * d].iter().all(|&g| g == 0.0));
        assert!(dq[(bh * lq + 2) * d..(bh + 1) * lq * d]
            .iter()
            .any(|&g| g != 0.0));
    }
    assert!(dk.iter().chain(&dv).all(|g| g.is_finite()));
}

#[test]
fn rows_without_keys_and_keys_without_rows_give_zeros_not_nan() {
    // Top-left window 1:0 with Lq < Lk: query i sees keys i - 1 and i; keys 5.. no
    // query (a window of one key would give dK = 0 everywhere: P = 1, dP = dpsum).
    let p: Problem = "1,2,5,12,64,f16,window=1:0".parse().unwrap();
    let g = gradients(&BackwardInputs::random(&p, 3, 1.0).unwrap()).unwrap();
    for h in 0..2 {
        for grad in [&g.dk, &g.dv] {
            let keys = &grad[h * 12 * 64..(h + 1) * 12 * 64];
            assert!(keys[5 * 64..].iter().all(|&x| x == 0.0));
            assert!(keys[..5 * 64].iter().all(|x| x.is_finite()));
            assert!(keys[..5 * 64]
                .chunks(64)
                .all(|r| r.iter().any(|&x| x != 0.0)));
        }
    }
    // Bottom-right causal with Lq > Lk: queries 0..7 see no key.
    let p: Problem = "1,2,12,5,64,bf16,causal=br".parse().unwrap();
    let inputs = BackwardInputs::random(&p, 4, 1.0).unwrap();
    for h in 0..2 {
        let lse = &inputs.lse[h * 12..(h + 1) * 12];
        assert!(lse[..7].iter().all(|&x| x == f32::INFINITY));
        assert!(lse[7..].iter().all(|x| x.is_finite()));
    }
    let g = gradients(&inputs).unwrap();
    assert!(g.dq.iter().chain(&g.dk).chain(&g.dv).all(|x| x.is_finite()));
    for h in 0..2 {
        let rows = &g.dq[h * 12 * 64..(h + 1) * 12 * 64];
        assert!(rows[..7 * 64].iter().all(|&x| x == 0.0));
    }
}

#[test]
fn any_rows_equal_the_full_computations_rows() {
    let p: Problem = "1,4,300,270,64,f16,causal=br,kv=2,window=100:"
        .parse()
        .unwrap();
    let inputs = BackwardInputs::random(&p, 11, 1.0).unwrap();
    let full = gradients(&inputs).unwrap();
    let d = 64;
    let dq_rows: Vec<Vec<u32>> = (0..4).map(|h| vec![299, 0, h * 50, 150, 29]).collect();
    let dkv_rows: Vec<Vec<u32>> = vec![vec![269, 0, 3, 135], vec![1, 200, 268]];
    let part = backward_rows(&inputs, &dq_rows, &dkv_rows).unwrap();
    let same = |what: &str, head: &HeadRows, whole: &[f32], len: usize| {
        for (r, &row) in head.rows.iter().enumerate() {
            let want = &whole[(len + row as usize) * d..][..d];
            let got = &head.values[r * d..(r + 1) * d];
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                    "{what} row {row}: {g} vs {w}"
                );
            }
        }
    };
    for (bh, head) in part.dq.iter().enumerate() {
        same("dQ", head, &full.dq, bh * 300);
    }
    for (g, (dk, dv)) in part.dk.iter().zip(&part.dv).enumerate() {
        same("dK", dk, &full.dk, g * 270);
        same("dV", dv, &full.dv, g * 270);
    }
}

#[test]
fn large_problems_sample_first_middle_last_and_match_the_full_rows() {
    let p: Problem = "1,2,2048,2049,64,f16,causal,kv=1".parse().unwrap();
    let keys = sample_key_rows(&p, 9, 0);
    assert_eq!(keys.len(), SAMPLED_ROWS);
    assert!(keys.contains(&0) && keys.contains(&1024) && keys.contains(&2048));
    assert_ne!(
        keys,
        sample_key_rows(&p, 9, 1),
        "each K/V head gets its own sample"
    );
    assert_ne!(
        keys,
        sample_key_rows(&p, 10, 0),
        "each seed gets its own sample"
    );
    let inputs = BackwardInputs::random(&p, 9, 1.0).unwrap();
    let sampled = sampled_gradients(&inputs).unwrap();
    assert!(!sampled.is_full(&p));
    assert_eq!(sampled.rows_checked(), 3 * SAMPLED_ROWS);
    let full = gradients(&inputs).unwrap();
    let d = 64;
    let heads = [
        ("dQ", &sampled.dq[1], &full.dq, 2048),
        ("dK", &sampled.dk[0], &full.dk, 0),
        ("dV", &sampled.dv[0], &full.dv, 0),
    ];
    for (what, head, whole, base) in heads {
        for (r, &row) in head.rows.iter().enumerate() {
            let want = &whole[(base + row as usize) * d..][..d];
            for (g, w) in head.values[r * d..(r + 1) * d].iter().zip(want) {
                // Sums of up to 2·Lq terms in another order (another gemm blocking).
                assert!(
                    (g - w).abs() <= 2e-5 * (1.0 + w.abs()),
                    "{what} row {row}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn wrong_row_lists_are_errors_that_name_the_argument() {
    let p: Problem = "1,4,8,8,64,f16,kv=2".parse().unwrap();
    let inputs = BackwardInputs::random(&p, 1, 1.0).unwrap();
    let rows = |n: usize, r: u32| vec![vec![r]; n];
    let err = |q: Vec<Vec<u32>>, k: Vec<Vec<u32>>| {
        backward_rows(&inputs, &q, &k).unwrap_err().to_string()
    };
    assert!(err(rows(3, 0), rows(2, 0)).contains("`dq_rows` holds 3 row lists"));
    assert!(err(rows(4, 0), rows(4, 0)).contains("one per K/V head, 2"));
    assert!(err(rows(4, 8), rows(2, 0)).contains("`dq_rows[0]` names row 8"));
    let mut short = inputs.clone();
    short.lse.pop();
    let e = backward_rows(&short, &rows(4, 0), &rows(2, 0)).unwrap_err();
    assert!(e.to_string().contains("`lse` holds 31 elements"), "{e}");
}

#[test]
fn d_o_has_a_stream_of_its_own_and_q_k_v_are_the_forwards() {
    let p: Problem = "2,2,33,17,64,bf16".parse().unwrap();
    let fwd = Inputs::random(&p, 5, 1.0);
    let bwd = BackwardInputs::random(&p, 5, 1.0).unwrap();
    assert_eq!((&bwd.q, &bwd.k, &bwd.v), (&fwd.q, &fwd.k, &fwd.v));
    assert_eq!(
        draw_stream(p.dtype, 5, 0, p.q_elems(), 1.0),
        fwd.q,
        "stream 0 is Q's"
    );
    assert_eq!(
        bwd.d_o,
        draw_stream(p.dtype, 5, D_O_STREAM, p.q_elems(), 1.0)
    );
    assert_ne!(bwd.d_o, bwd.q);
    let g = bwd.d_o_f32();
    let mean = g.iter().sum::<f32>() / g.len() as f32;
    let var = g.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / g.len() as f32;
    assert!(
        mean.abs() < 0.05 && (var - 1.0).abs() < 0.1,
        "mean {mean} var {var}"
    );
}
