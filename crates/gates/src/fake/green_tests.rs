//! GREEN and `evaluate` on the fake kernels: every wrong kind is rejected with a reason.

use super::*;
use crate::evaluate::{evaluate, EvalOptions};
use crate::fast::FastOptions;
use crate::green::{run_green, GreenCache, GreenOptions};
use crate::outcome::Status;
use crate::suite::{Case, LARGE_LOGIT_GAIN};
use evo_genome::{Dtype, Genome, HeadDim};

/// `(B, H, Lq, Lk)`, head dim, dtype, causal, Q gain.
pub(super) fn case(
    shape: (u32, u32, u32, u32),
    d: HeadDim,
    dtype: Dtype,
    causal: bool,
    q_gain: f32,
) -> Case {
    let (batch, heads, q_len, kv_len) = shape;
    Case {
        problem: Problem {
            batch,
            heads,
            q_len,
            kv_len,
            head_dim: d,
            dtype,
            causal,
            ..Problem::seed()
        },
        q_gain,
        drawn: false,
    }
}

/// Small cases with the same traps as the default suite (debug-build CPU speed).
pub(super) fn small_suite() -> Vec<Case> {
    vec![
        case((2, 3, 77, 77), HeadDim::D64, Dtype::F16, true, 1.0),
        case((1, 2, 100, 40), HeadDim::D128, Dtype::Bf16, true, 1.0),
        case((1, 3, 20, 90), HeadDim::D64, Dtype::F16, false, 1.0),
        case(
            (1, 2, 96, 96),
            HeadDim::D64,
            Dtype::F16,
            false,
            LARGE_LOGIT_GAIN,
        ),
    ]
}

pub(super) fn green(b: Behaviour) -> crate::green::GreenReport {
    let mut k = FakeKernel::new(b);
    run_green(
        &mut k,
        &small_suite(),
        GreenOptions {
            seed: 5,
            stop_at_first_failure: false,
        },
    )
    .unwrap()
}

#[test]
fn the_correct_kernel_passes_with_small_errors() {
    let r = green(Behaviour::Correct);
    assert!(r.passed(), "{}", r.failures());
    assert_eq!(r.cases.len(), 4);
    for c in &r.cases {
        assert_eq!(c.launches.len(), 2);
        assert_ne!(c.launches[0].input_seed, c.launches[1].input_seed);
        assert!(
            c.rel_frob() < c.tolerance.rel_frob / 2.0,
            "{}: {}",
            c.case,
            c.rel_frob()
        );
    }
    assert!(r.cases[3].launches[0].max_abs_score > 100.0);
}

fn assert_rejected(b: Behaviour, expect: &str) {
    let r = green(b);
    assert!(!r.passed(), "{b:?} passed GREEN");
    let failures = r.failures();
    assert!(failures.contains(expect), "{b:?}: {failures}");
}

#[test]
fn every_wrong_kind_is_rejected_with_a_reason() {
    assert_rejected(Behaviour::Zeros, "max abs error");
    assert_rejected(Behaviour::CopiesV, "relative Frobenius error");
    assert_rejected(
        Behaviour::SkipsLastPartialTile,
        "never written (still the NaN poison), first at (b=0, h=0, row=64",
    );
    assert_rejected(
        Behaviour::IgnoresCausal,
        "B2 H3 L77 D64 f16 causal, launch 1 of 2",
    );
    assert_rejected(Behaviour::HalfTheBatch, "never written");
    assert_rejected(Behaviour::NoRunningMax, "large-logits");
    assert_rejected(Behaviour::ReusesFirstResult, "launch 2 of 2");
    assert_rejected(Behaviour::DropsLastKey, "relative Frobenius error");
    assert_rejected(Behaviour::Biased(0.05f32.to_bits()), "max abs error");
}

#[test]
fn no_running_max_fails_only_the_large_logit_case() {
    let r = green(Behaviour::NoRunningMax);
    let failed: Vec<&str> = r
        .cases
        .iter()
        .filter(|c| !c.passed())
        .map(|c| c.case.as_str())
        .collect();
    assert_eq!(failed, vec!["B1 H2 L96 D64 f16 large-logits"]);
    assert!(r.failures().contains("NaN or Inf"), "{}", r.failures());
}

#[test]
fn a_failure_names_where_and_by_how_much() {
    let r = green(Behaviour::IgnoresCausal);
    let c = &r.cases[0];
    let w = c.launches[0].worst.unwrap();
    assert!(w.row < 76, "the last row sees every key either way");
    let reason = c.reason().unwrap();
    assert!(
        reason.contains(&format!("row={}", w.row)) && reason.contains("expected"),
        "{reason}"
    );
}

#[test]
fn stop_at_first_failure_stops() {
    let mut k = FakeKernel::new(Behaviour::Zeros);
    let r = run_green(
        &mut k,
        &small_suite(),
        GreenOptions {
            seed: 1,
            stop_at_first_failure: true,
        },
    )
    .unwrap();
    assert_eq!(r.cases.len(), 1);
}

#[test]
fn a_store_past_the_end_fails_green_with_the_region() {
    let c = &small_suite()[0];
    let inputs = Inputs::random(&c.problem, 1, 1.0);
    let refs = crate::reference::reference(&inputs).unwrap();
    let mut out = with_guard(attention(&inputs, Behaviour::Correct));
    assert_eq!(crate::green::judge(&inputs, &out, &refs).failure, None);
    let mut guard = vec![crate::inputs::GUARD_BITS; crate::inputs::GUARD_ELEMS];
    guard[3] = 0;
    out.guard_breach = crate::inputs::guard_breach("O", &guard, crate::inputs::GUARD_BITS);
    let why = crate::green::judge(&inputs, &out, &refs).failure.unwrap();
    assert!(why.contains("wrote past the end of O"), "{why}");
    assert!(why.contains("1 of the 16384 guard elements"), "{why}");
}

fn small_objective() -> Vec<Problem> {
    vec![small_suite()[2].problem]
}

#[test]
fn evaluate_fills_the_record_or_says_why_not() {
    let g = Genome::baseline();
    let opts = EvalOptions {
        seed: 3,
        fast: FastOptions::default(),
    };
    let mut ok = FakeKernel::new(Behaviour::Correct);
    let e = evaluate(
        &mut ok,
        &g,
        "fake",
        None,
        &small_suite(),
        &small_objective(),
        &opts,
        &mut GreenCache::default(),
    );
    assert_eq!(e.status, Status::Ok, "{}", e.detail);
    assert!((e.score_us.unwrap() - 20.0).abs() < 1e-9);
    assert_eq!(e.timings.len(), 1);

    let mut bad = FakeKernel::new(Behaviour::IgnoresCausal);
    let e = evaluate(
        &mut bad,
        &g,
        "fake",
        None,
        &small_suite(),
        &small_objective(),
        &opts,
        &mut GreenCache::default(),
    );
    assert_eq!(e.status, Status::GreenFailed);
    assert!(e.detail.contains("causal"), "{}", e.detail);
    assert!(
        e.timings.is_empty() && e.score_us.is_none(),
        "FAST runs only after GREEN"
    );
}

#[test]
fn a_kernel_that_stops_working_after_green_fails_fast_verification() {
    let mut k = FakeKernel::new(Behaviour::EveryKth(1_000_000));
    let opts = EvalOptions {
        seed: 3,
        fast: FastOptions::default(),
    };
    let e = evaluate(
        &mut k,
        &Genome::baseline(),
        "fake",
        None,
        &small_suite(),
        &small_objective(),
        &opts,
        &mut GreenCache::default(),
    );
    assert_eq!(e.status, Status::GreenFailed);
    assert!(
        e.detail.starts_with("passed GREEN but failed on")
            && e.detail.contains("FAST verification"),
        "{}",
        e.detail
    );
    assert!(e.timings.is_empty() && e.score_us.is_none());
}

#[test]
fn grouped_heads_diagonals_and_windows_are_judged() {
    let kinds: Vec<Case> = [
        "2,6,9,40,64,f16,causal=br,kv=2",
        "1,4,30,9,64,bf16,causal=br,kv=1",
        "1,2,50,50,128,f16,causal,window=7:",
        "1,3,20,60,64,f16,window=5:9,align=br,kv=1",
    ]
    .iter()
    .map(|spec| Case {
        problem: spec.parse().unwrap(),
        q_gain: 1.0,
        drawn: false,
    })
    .collect();
    let run = |b| {
        run_green(
            &mut FakeKernel::new(b),
            &kinds,
            GreenOptions {
                seed: 3,
                stop_at_first_failure: false,
            },
        )
        .unwrap()
    };
    let right = run(Behaviour::Correct);
    assert!(right.passed(), "{}", right.failures());
    assert!(right.skipped.is_empty());
    // A kernel that drops the mask is caught on every masked kind, the window included.
    let unmasked = run(Behaviour::IgnoresCausal);
    assert!(!unmasked.passed());
    assert!(unmasked.cases.iter().skip(1).all(|c| !c.passed()));
}

#[test]
fn a_first_abi_kernel_runs_the_cases_it_cannot_state_as_their_basic_form() {
    let cases: Vec<Case> = [
        "1,8,77,300,64,f16,causal=br,kv=2",
        "1,2,40,40,64,f16,causal",
    ]
    .iter()
    .map(|spec| Case {
        problem: spec.parse().unwrap(),
        q_gain: 1.0,
        drawn: true,
    })
    .collect();
    let r = run_green(
        &mut FakeKernel::new(Behaviour::FirstAbi),
        &cases,
        GreenOptions {
            seed: 4,
            stop_at_first_failure: false,
        },
    )
    .unwrap();
    assert!(r.passed(), "{}", r.failures());
    assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
    // The drawn lengths still ran: a kernel cannot dodge them by its ABI.
    assert_eq!(r.cases.len(), 2);
    assert_eq!(r.cases[0].problem.spec(), "1,8,77,300,64,f16,causal");
}

#[test]
fn a_persistent_kernel_wrong_past_its_first_tile_fails_on_the_capped_launches() {
    let r = green(Behaviour::WrongPastFirstTile);
    assert!(!r.passed());
    for c in &r.cases {
        // Launch 0 runs on the whole grid (one tile per CTA at these shapes) and passes;
        // launch 1 runs on 1 to 3 CTAs and is caught.
        assert_eq!(c.launches[0].failure, None, "{}", c.case);
        assert!(c.launches[1].failure.is_some(), "{}", c.case);
    }
}

#[test]
fn green_caps_the_persistent_grid_on_every_other_launch() {
    for seed in 0..30u64 {
        assert_eq!(crate::green::persistent_grid_of(0, seed), None);
        let cap = crate::green::persistent_grid_of(1, seed).unwrap();
        assert!((1..=3).contains(&cap), "{cap}");
    }
    let caps: std::collections::BTreeSet<u32> = (0..30u64)
        .filter_map(|s| crate::green::persistent_grid_of(1, s))
        .collect();
    assert_eq!(caps.len(), 3, "every cap from 1 to 3 is drawn: {caps:?}");
}
