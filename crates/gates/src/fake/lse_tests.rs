//! GREEN's check of the forward's log-sum-exp (`evo_lse`) on fake kernels: a kernel
//! that declares it is run once more per case with the lse asked for, and a wrong or
//! missing lse fails with the case, the (b, h, row) and the values.

use super::*;
use crate::green::{run_green, GreenOptions, GreenReport};
use crate::suite::Case;

/// The small suite, and a bottom-right causal case with Lq > Lk whose rows 0..29 of
/// every head see no key.
fn cases() -> Vec<Case> {
    let mut cases = super::green_tests::small_suite();
    cases.push(Case {
        problem: "1,4,40,11,64,bf16,causal=br,kv=2".parse().unwrap(),
        q_gain: 1.0,
        drawn: false,
    });
    cases
}

fn green_with(lse: Option<LseBehaviour>) -> GreenReport {
    let mut k = FakeKernel::new(Behaviour::Correct);
    k.lse = lse;
    run_green(
        &mut k,
        &cases(),
        GreenOptions {
            seed: 5,
            stop_at_first_failure: false,
        },
    )
    .unwrap()
}

#[test]
fn a_kernel_that_declares_evo_lse_has_its_lse_checked_on_every_case() {
    let right = green_with(Some(LseBehaviour::Correct));
    assert!(right.passed(), "{}", right.failures());
    for case in &right.cases {
        let lse = case.lse.as_ref().expect("an lse launch per case");
        assert_eq!(lse.lse.failure, None, "{}", case.case);
        assert_eq!(lse.lse.max_err, 0.0, "{}", case.case);
        assert_eq!(lse.o.failure, None, "{}", case.case);
        assert_eq!(lse.input_seed, case.launches[0].input_seed);
    }
    // Without evo_lse there is no such launch.
    let without = green_with(None);
    assert!(without.passed(), "{}", without.failures());
    assert!(without.cases.iter().all(|c| c.lse.is_none()));
}

#[test]
fn a_wrong_lse_fails_green_naming_the_row_and_the_values() {
    // Flat row 2·77 + 40 of the first case (B2 H3 Lq77): b = 0, h = 2, row 40.
    let off = green_with(Some(LseBehaviour::OffOnRow(2 * 77 + 40, 0.25)));
    assert!(!off.passed());
    let why = off.failures();
    assert!(why.contains("the launch with the lse asked"), "{why}");
    assert!(why.contains("worst at (b=0, h=2, row=40)"), "{why}");
    assert!(why.contains("expected"), "{why}");
    // Every case's lse is checked: the same row is of another (b, h) in other cases.
    assert!(!off.cases[0].passed() && off.cases[0].launches.iter().all(|l| l.failure.is_none()));
    // A small error within 2e-3 + 1e-3·|lse| passes.
    let close = green_with(Some(LseBehaviour::OffOnRow(2 * 77 + 40, 1e-3)));
    assert!(close.passed(), "{}", close.failures());
}

#[test]
fn an_lse_never_written_fails_green_naming_the_first_row() {
    let unwritten = green_with(Some(LseBehaviour::Unwritten));
    assert!(!unwritten.passed());
    assert!(unwritten.cases.iter().all(|c| !c.passed()));
    let why = unwritten.cases[0].reason().unwrap();
    assert!(
        why.contains(
            "462 of 462 rows never written (still the NaN poison), first at (b=0, h=0, row=0)"
        ),
        "{why}"
    );
}

#[test]
fn rows_that_see_no_key_must_be_plus_infinity() {
    // The last case: row 3 of (b=0, h=1) sees no key (bottom-right causal, Lq 40 > Lk 11).
    let mut k = FakeKernel::new(Behaviour::Correct);
    k.lse = Some(LseBehaviour::OffOnRow(40 + 3, f32::NEG_INFINITY));
    let case = cases().pop().unwrap();
    let report = run_green(
        &mut k,
        &[case],
        GreenOptions {
            seed: 5,
            stop_at_first_failure: false,
        },
    )
    .unwrap();
    let why = report.failures();
    // +inf + -inf is NaN: the row holds neither the poison nor +inf.
    assert!(
        why.contains("first at (b=0, h=1, row=3): got NaN, expected +inf"),
        "{why}"
    );
}
