//! The shapes GREEN draws from each run's seed, beside a suite's fixed cases: lengths
//! no fixed suite uses, and every problem kind (grouped heads, the diagonal, windows).

use super::{Case, GreenSuite};
use evo_genome::{Dtype, HeadDim, MaskAlign, Problem};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Shapes GREEN draws per run, in addition to a suite's fixed cases.
pub const DRAWN_CASES: usize = 8;
/// The longest length a drawn shape may have.
pub const MAX_DRAWN_LEN: u32 = 16384;
/// Drawn Lq·Lk stays at or under this (a slow candidate still runs in milliseconds).
pub const MAX_DRAWN_SCORES: u64 = 1 << 25;

/// Every length a fixed case of the built-in suites uses: drawn shapes avoid them, so
/// a kernel tuned to the suite's lengths meets others.
pub fn suite_lengths() -> Vec<u32> {
    let mut lens: Vec<u32> = [GreenSuite::Default, GreenSuite::Quick]
        .iter()
        .flat_map(|s| s.cases())
        .flat_map(|c| [c.problem.q_len, c.problem.kv_len])
        .collect();
    lens.sort_unstable();
    lens.dedup();
    lens
}

/// `n` shapes drawn from `seed` (a gate draws [`DRAWN_CASES`]): B 1..=2, K/V heads
/// 1..=3 with 1, 2 or 4 query heads each (grouped-query attention in two of three), Lq
/// and Lk log-uniform in 1..=16384 and never a length of the fixed suites, both head
/// dims 64 and 128, both dtypes, causal and not (the first six cover every combination
/// pair), then one at head dim 96 and one at 256 (dtype and mask drawn), the mask's
/// diagonal bottom-right in half, a sliding window in a third.
/// The first has Lk >= 8192, the second Lq >= 4096; Lq·Lk is capped at
/// [`MAX_DRAWN_SCORES`]. The same seed draws the same shapes (`evo gate --seed`).
pub fn drawn_cases(seed: u64, n: usize) -> Vec<Case> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_D8A3_0000_0001);
    let avoid = suite_lengths();
    let len = |rng: &mut ChaCha8Rng, lo: u32, hi: u32| loop {
        let x = ((lo as f64).ln() + rng.random::<f64>() * ((hi as f64).ln() - (lo as f64).ln()))
            .exp()
            .round() as u32;
        let x = x.clamp(lo, hi);
        if !avoid.contains(&x) {
            break x;
        }
    };
    (0..n)
        .map(|i| {
            let (q_len, kv_len) = loop {
                let (lq, lk) = match i {
                    0 => (len(&mut rng, 1, 1024), len(&mut rng, 8192, MAX_DRAWN_LEN)),
                    1 => (len(&mut rng, 4096, MAX_DRAWN_LEN), len(&mut rng, 1, 2048)),
                    _ => (
                        len(&mut rng, 1, MAX_DRAWN_LEN),
                        len(&mut rng, 1, MAX_DRAWN_LEN),
                    ),
                };
                if lq as u64 * lk as u64 <= MAX_DRAWN_SCORES {
                    break (lq, lk);
                }
            };
            let kv_heads = rng.random_range(1..=3u32);
            let group = [1u32, 2, 4][rng.random_range(0..3)];
            let (head_dim, dtype, causal) = match i {
                0..6 => (
                    [HeadDim::D64, HeadDim::D128][i % 2],
                    [Dtype::F16, Dtype::Bf16][(i / 2) % 2],
                    (i / 3) % 2 == 1,
                ),
                _ => (
                    [HeadDim::D96, HeadDim::D256][i % 2],
                    Dtype::ALL[rng.random_range(0..2)],
                    rng.random_bool(0.5),
                ),
            };
            let align = if rng.random_bool(0.5) {
                MaskAlign::BottomRight
            } else {
                MaskAlign::TopLeft
            };
            let (window_left, window_right) = if rng.random_bool(1.0 / 3.0) {
                let reach = q_len.max(kv_len);
                let left = Some(rng.random_range(0..reach));
                let right = (!causal).then(|| rng.random_range(0..reach));
                (left, right)
            } else {
                (None, None)
            };
            Case {
                problem: Problem {
                    batch: rng.random_range(1..=2),
                    heads: kv_heads * group,
                    kv_heads: (group > 1).then_some(kv_heads),
                    q_len,
                    kv_len,
                    head_dim,
                    dtype,
                    causal,
                    align,
                    window_left,
                    window_right,
                },
                q_gain: 1.0,
                drawn: true,
            }
        })
        .collect()
}

/// A suite's fixed cases followed by the shapes drawn from `seed`: what GREEN runs
/// when it is the full gate.
pub fn full_cases(fixed: Vec<Case>, seed: u64) -> Vec<Case> {
    let mut cases = fixed;
    cases.extend(drawn_cases(seed, DRAWN_CASES));
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_shapes_cover_what_the_issue_asks_and_follow_the_seed() {
        let avoid = suite_lengths();
        let mut all_lens = std::collections::BTreeSet::new();
        let mut kinds = (false, false, false, false, false);
        for seed in 0..200 {
            let cases = drawn_cases(seed, DRAWN_CASES);
            assert_eq!(cases.len(), DRAWN_CASES);
            let has = |f: &dyn Fn(&Problem) -> bool| cases.iter().any(|c| f(&c.problem));
            assert!(has(&|p| p.kv_len >= 8192), "seed {seed}: no Lk >= 8192");
            assert!(has(&|p| p.q_len >= 4096), "seed {seed}: no Lq >= 4096");
            for d in HeadDim::ALL {
                assert!(has(&|p| p.head_dim == d), "seed {seed}: no D{d}");
            }
            assert!(has(&|p| p.dtype == Dtype::F16) && has(&|p| p.dtype == Dtype::Bf16));
            assert!(has(&|p| p.causal) && has(&|p| !p.causal));
            for c in &cases {
                let p = c.problem;
                p.validate().unwrap();
                assert!(c.drawn && c.label().ends_with(" drawn"));
                assert!(p.batch <= 2 && p.kv_heads() <= 3 && p.group() <= 4);
                assert_eq!(p.heads % p.kv_heads(), 0);
                kinds.0 |= p.group() > 1;
                kinds.1 |= p.align == MaskAlign::BottomRight && p.causal;
                kinds.2 |= p.window_left.is_some();
                kinds.3 |= p.window_right.is_some();
                kinds.4 |= (0..p.q_len).any(|i| p.visible_keys(i).is_empty());
                assert!(
                    (1..=MAX_DRAWN_LEN).contains(&p.q_len)
                        && (1..=MAX_DRAWN_LEN).contains(&p.kv_len)
                );
                assert!(!avoid.contains(&p.q_len) && !avoid.contains(&p.kv_len));
                assert!(p.q_len as u64 * p.kv_len as u64 <= MAX_DRAWN_SCORES);
                all_lens.insert(p.q_len);
                all_lens.insert(p.kv_len);
            }
        }
        assert_eq!(kinds, (true, true, true, true, true), "every kind is drawn");
        assert!(all_lens.len() > 500, "lengths spread: {}", all_lens.len());
        assert!(all_lens.iter().any(|&l| l < 16) && all_lens.iter().any(|&l| l > 10000));
        assert_eq!(drawn_cases(5, 6), drawn_cases(5, 6));
        assert_ne!(drawn_cases(5, 6), drawn_cases(6, 6));
        let full = full_cases(GreenSuite::Default.cases(), 5);
        assert_eq!(full.len(), GreenSuite::Default.cases().len() + DRAWN_CASES);
    }
}
