//! FAST on the fake kernels: what it times, which launches it checks, and the cheats.

use super::green_tests::{case, green, small_suite};
use super::*;
use crate::fast::{time_problem, FastOptions};
use crate::green::{run_green, GreenOptions};
use crate::suite::Case;
use evo_genome::{Dtype, HeadDim};

fn fixed(nonce: u64) -> FastOptions {
    FastOptions {
        nonce: Some(nonce),
        ..FastOptions::default()
    }
}

#[test]
fn fast_uses_graphs_for_small_calls_and_falls_back_to_events() {
    let p = small_suite()[2].problem;
    let sets = crate::fast::input_sets(&p);
    let mut k = FakeKernel::new(Behaviour::Correct);
    let f = time_problem(&mut k, &p, &fixed(9)).unwrap();
    let t = &f.timing;
    assert_eq!(t.method, "graph");
    assert!(
        (t.median_us - 20.0).abs() < 1e-9,
        "graph replay has no host gaps"
    );
    assert_eq!(
        t.launches_per_repeat as usize, sets,
        "each set launched once per repeat"
    );
    assert_eq!(t.repeats, 20);
    assert_eq!(f.failure(), None);
    assert_eq!(f.timed_launches, 20 * sets);

    let mut k = FakeKernel::new(Behaviour::Correct);
    k.graph_fails = true;
    let t = time_problem(&mut k, &p, &fixed(9)).unwrap().timing;
    assert_eq!(t.method, "events");
    assert!((t.median_us - 24.0).abs() < 1e-9);

    let mut k = FakeKernel::new(Behaviour::Correct);
    k.call_us = 5000.0;
    let t = time_problem(&mut k, &p, &fixed(9)).unwrap().timing;
    assert_eq!(t.method, "events");
    assert!(!k.timed_with.contains(&TimingMethod::Graph));
    let tight = FastOptions {
        budget_ms: 12.0,
        ..fixed(9)
    };
    let t = time_problem(&mut k, &p, &tight).unwrap().timing;
    assert_eq!(t.repeats, 3, "over budget: never fewer than 3 repeats");
}

#[test]
fn every_launch_meets_inputs_no_earlier_launch_met() {
    let p = small_suite()[2].problem;
    let mut k = FakeKernel::new(Behaviour::Correct);
    let f = time_problem(&mut k, &p, &fixed(4)).unwrap();
    assert_eq!(f.failure(), None);
    // Each launch reads three tensors of one draw; no draw comes back, in the warm-up
    // or the timed repeats.
    let mut seeds = k.seeds_met.clone();
    let launches = seeds.len() / 3;
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), launches, "a draw per launch, never repeated");
    assert!(launches > f.timed_launches, "the warm-up draws anew too");
    // And another FAST of the same kernel meets other inputs again.
    let before: HashSet<u64> = k.seeds_met.iter().copied().collect();
    k.seeds_met.clear();
    time_problem(&mut k, &p, &FastOptions::default()).unwrap();
    assert!(k.seeds_met.iter().all(|s| !before.contains(s)));
}

#[test]
fn fast_checks_every_launch_of_two_repeats_and_one_of_every_other() {
    let p = small_suite()[2].problem;
    let sets = crate::fast::input_sets(&p);
    let mut k = FakeKernel::new(Behaviour::Correct);
    let f = time_problem(&mut k, &p, &fixed(5)).unwrap();
    let repeats = f.timing.repeats as usize;
    assert_eq!(f.checks.len(), 2 * sets + repeats - 2);
    let per_repeat = |r: usize| f.checks.iter().filter(|c| c.repeat == r).count();
    assert_eq!(per_repeat(repeats - 1), sets, "the last repeat in full");
    let full: Vec<usize> = (0..repeats - 1)
        .filter(|&r| per_repeat(r) == sets)
        .collect();
    assert_eq!(full.len(), 1, "one earlier repeat in full");
    assert!(
        (0..repeats).all(|r| per_repeat(r) >= 1),
        "every repeat checked"
    );
    assert!(f
        .checks
        .iter()
        .all(|c| c.check.rows_checked == (p.batch * p.heads * p.q_len) as usize));
    // Another nonce keeps another repeat.
    let other = time_problem(&mut FakeKernel::new(Behaviour::Correct), &p, &fixed(6)).unwrap();
    let kept = |f: &crate::fast::Fast| {
        (0..repeats - 1).find(|&r| f.checks.iter().filter(|c| c.repeat == r).count() == sets)
    };
    assert!((1..40).any(|n| kept(
        &time_problem(&mut FakeKernel::new(Behaviour::Correct), &p, &fixed(n)).unwrap()
    ) != kept(&other)));
}

#[test]
fn fast_fails_kernels_that_skip_timed_work_and_names_the_check() {
    let p = small_suite()[2].problem;
    // Every O is poisoned before every repeat, so a peek at O never finds a result:
    // the peeking kernel computes on every timed launch and passes, timed honestly.
    let mut k = FakeKernel::new(Behaviour::PeeksAtOutput);
    let f = time_problem(&mut k, &p, &fixed(1)).unwrap();
    assert_eq!(f.failure(), None);
    for cheat in [
        Behaviour::MemoByPointer,
        Behaviour::EveryKth(4),
        Behaviour::SkipsAlternateRepeats,
    ] {
        assert!(green(cheat).passed(), "{cheat:?} computes during GREEN");
        let mut k = FakeKernel::new(cheat);
        let f = time_problem(&mut k, &p, &fixed(2)).unwrap();
        let why = f
            .failure()
            .unwrap_or_else(|| panic!("{cheat:?} passed FAST"));
        assert!(why.starts_with("FAST verification"), "{why}");
        assert!(why.contains("never written"), "{cheat:?}: {why}");
    }
}

#[test]
fn a_content_memo_finds_nothing_to_reuse_and_is_timed_doing_the_work() {
    let p = small_suite()[2].problem;
    let honest = time_problem(&mut FakeKernel::new(Behaviour::Correct), &p, &fixed(3)).unwrap();
    let mut k = FakeKernel::new(Behaviour::MemoByContent);
    let memo = time_problem(&mut k, &p, &fixed(3)).unwrap();
    assert_eq!(memo.failure(), None);
    assert_eq!(memo.timing.median_us, honest.timing.median_us);
}

#[test]
fn work_done_ahead_for_another_launch_is_done_on_the_wrong_inputs() {
    let p = small_suite()[2].problem;
    let mut k = FakeKernel::new(Behaviour::BatchesNextSet);
    let f = time_problem(&mut k, &p, &fixed(8)).unwrap();
    let why = f.failure().expect("the slots are paired anew every repeat");
    assert!(why.contains("relative Frobenius error"), "{why}");
}

#[test]
fn a_kernel_that_writes_into_its_inputs_fails() {
    let p = small_suite()[2].problem;
    let mut k = FakeKernel::new(Behaviour::WritesIntoInputs);
    let why = time_problem(&mut k, &p, &fixed(8))
        .unwrap()
        .failure()
        .unwrap();
    assert!(why.contains("no longer hold the inputs"), "{why}");
}

#[test]
fn a_device_reference_that_disagrees_with_candle_stops_fast() {
    let p = small_suite()[2].problem;
    let mut k = FakeKernel::new(Behaviour::Correct);
    k.reference_off = 0.01;
    let e = time_problem(&mut k, &p, &fixed(8)).unwrap_err();
    assert!(matches!(e, GateError::Reference(_)), "{e}");
    assert!(e.to_string().contains("disagrees with candle"), "{e}");
}

/// Above the size where GREEN samples rows: B1 H2 Lq 2100 Lk 1024 D64, whose one
/// sparse defect row (b·H·Lq + row = 4095) is h = 1, row 1995.
fn large_case() -> Case {
    case((1, 2, 2100, 1024), HeadDim::D64, Dtype::F16, false, 1.0)
}

#[test]
fn green_judges_every_row_of_large_cases_where_the_kernel_has_a_device() {
    assert!(large_case().problem.macs() > crate::reference::FULL_REFERENCE_MACS);
    let run = |device_checks: bool| {
        let mut k = FakeKernel::new(Behaviour::SparseRowDefect);
        k.device_checks = device_checks;
        run_green(
            &mut k,
            &[large_case()],
            GreenOptions {
                seed: 12,
                stop_at_first_failure: false,
            },
        )
        .unwrap()
    };
    let sampled = run(false);
    assert!(
        sampled.passed(),
        "48 sampled rows miss row 4095: {}",
        sampled.failures()
    );
    let every = run(true);
    assert!(!every.passed(), "every row: row 4095 is seen");
    assert!(
        every.failures().contains("h=1, row=1995"),
        "{}",
        every.failures()
    );
    assert_eq!(every.cases[0].launches[0].rows_checked, 4200);
    let honest = {
        let mut k = FakeKernel::new(Behaviour::Correct);
        run_green(
            &mut k,
            &[large_case()],
            GreenOptions {
                seed: 12,
                stop_at_first_failure: false,
            },
        )
        .unwrap()
    };
    assert!(honest.passed(), "{}", honest.failures());
}
