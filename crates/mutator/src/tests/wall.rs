//! A wall budget is a total across resumes: the lineage records the time spent, a
//! resumed clock starts there, and a search whose time is spent replays its record.

use super::*;

/// A fake evaluator taking 0.7 s an evaluation on a fake clock that reads `start`.
fn timed(start: Duration) -> (FakeEvaluator, Rc<Cell<Duration>>) {
    let now = Rc::new(Cell::new(start));
    let mut fake = FakeEvaluator::new();
    fake.clock = Some((now.clone(), Duration::from_millis(700)));
    (fake, now)
}

fn steady(budget: Budget) -> SearchConfig {
    let mut c = config(StrategyKind::Evolutionary, budget, 3);
    c.params.steady = true;
    c.params.in_flight = Some(4);
    c.seeds = Vec::new();
    c
}

/// Runs `config` from a clock reading `start`, writing `lineage` (and `cache` if given).
fn run(
    config: &SearchConfig,
    fake: &mut FakeEvaluator,
    now: &Rc<Cell<Duration>>,
    lineage: &Path,
    cache: Option<&mut EvaluationCache>,
) -> SearchOutcome {
    search(
        config,
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        fake,
        Sinks {
            cache,
            lineage_path: Some(lineage),
            ..Sinks::default()
        },
        &FakeClock(now.clone()),
    )
    .unwrap()
}

#[test]
fn the_lineage_records_the_wall_time_spent_only_under_a_wall_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lineage.json");
    let wall = Budget::Wall(Duration::from_secs(10));
    for config in [config(StrategyKind::Evolutionary, wall, 3), steady(wall)] {
        let (mut fake, now) = timed(Duration::ZERO);
        let out = run(&config, &mut fake, &now, &path, None);
        // 14 evaluations of 0.7 s end at 9.8 s.
        assert_eq!(out.evaluations, 14);
        assert_eq!(
            out.lineage.wall_s,
            Some(9.8),
            "steady: {}",
            config.params.steady
        );
        let on_file = evo_lineage::Lineage::load(&path).unwrap();
        assert_eq!(on_file.wall_s, Some(9.8), "saved with the lineage");
    }
    let evaluations = Budget::Evaluations(20);
    for config in [
        config(StrategyKind::Evolutionary, evaluations, 3),
        steady(evaluations),
    ] {
        let (mut fake, now) = timed(Duration::ZERO);
        let out = run(&config, &mut fake, &now, &path, None);
        assert_eq!((out.evaluations, out.lineage.wall_s), (20, None));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("wall_s"), "{text}");
    }
}

#[test]
fn a_resumed_clock_stops_the_search_when_the_time_before_and_since_reach_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lineage.json");
    let wall = Budget::Wall(Duration::from_secs(10));
    for config in [config(StrategyKind::Evolutionary, wall, 3), steady(wall)] {
        // 7 s spent before: 4 evaluations of 0.7 s end at 9.8 s, a 5th would at 10.5 s.
        let (mut fake, now) = timed(Duration::from_secs(7));
        let out = run(&config, &mut fake, &now, &path, None);
        let steady = config.params.steady;
        assert_eq!(
            (out.evaluations, out.stop),
            (4, StopReason::Budget),
            "{steady}"
        );
        assert_eq!(out.lineage.wall_s, Some(9.8), "{steady}");
    }
    // The real clock, with all of the budget spent before: nothing starts.
    let clock = WallClock::resumed(Duration::from_secs(10));
    assert!(clock.elapsed() >= Duration::from_secs(10));
    let mut fake = FakeEvaluator::new();
    let out = search(
        &config(StrategyKind::Evolutionary, wall, 3),
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        &mut fake,
        Sinks::default(),
        &clock,
    )
    .unwrap();
    assert_eq!(
        (fake.calls, out.evaluations, out.stop),
        (0, 0, StopReason::Budget)
    );
}

/// A resumed generational search whose time is spent measures nothing and rebuilds the
/// lineage on file from the cache; a larger total goes on from the time spent.
#[test]
fn a_spent_wall_budget_replays_its_record_and_a_larger_one_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lineage.json");
    let log = dir.path().join("evaluations.jsonl");
    let ten = config(
        StrategyKind::Evolutionary,
        Budget::Wall(Duration::from_secs(10)),
        5,
    );
    let (mut fake, now) = timed(Duration::ZERO);
    let mut cache = EvaluationCache::open(&log, fixture::cache_scope()).unwrap();
    let first = run(&ten, &mut fake, &now, &path, Some(&mut cache));
    assert_eq!((first.evaluations, first.lineage.wall_s), (14, Some(9.8)));

    // Spent: the clock reads the limit (a resume's time spent and its replay).
    let (mut fake, now) = timed(Duration::from_secs(10));
    let mut cache = EvaluationCache::open(&log, fixture::cache_scope()).unwrap();
    let replay = run(&ten, &mut fake, &now, &path, Some(&mut cache));
    assert_eq!(
        (fake.calls, replay.cache_hits, replay.stop),
        (0, 14, StopReason::Budget)
    );
    let nodes = |l: &evo_lineage::Lineage| l.nodes().cloned().collect::<Vec<_>>();
    assert_eq!(nodes(&replay.lineage), nodes(&first.lineage));
    assert_eq!(replay.lineage.wall_s, Some(10.0));

    // Twice the total: the 9.8 s spent count, so 14 more evaluations fit.
    let twenty = config(
        StrategyKind::Evolutionary,
        Budget::Wall(Duration::from_secs(20)),
        5,
    );
    let (mut fake, now) = timed(Duration::from_millis(9800));
    let mut cache = EvaluationCache::open(&log, fixture::cache_scope()).unwrap();
    let more = run(&twenty, &mut fake, &now, &path, Some(&mut cache));
    assert_eq!(
        (fake.evaluated, more.cache_hits, more.evaluations),
        (14, 14, 28)
    );
    assert_eq!(more.lineage.wall_s, Some(19.6));
    assert_eq!(
        nodes(&more.lineage)[..14],
        nodes(&first.lineage)[..],
        "the record is replayed first"
    );
}

/// A steady-state search submits nothing once its time is spent, and leaves the lineage
/// on file as it is (`evo evolve` refuses to resume it).
#[test]
fn a_spent_steady_search_takes_nothing_and_keeps_the_lineage_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lineage.json");
    let log = dir.path().join("evaluations.jsonl");
    let wall = steady(Budget::Wall(Duration::from_secs(10)));
    let (mut fake, now) = timed(Duration::ZERO);
    let mut cache = EvaluationCache::open(&log, fixture::cache_scope()).unwrap();
    assert_eq!(
        run(&wall, &mut fake, &now, &path, Some(&mut cache)).evaluations,
        14
    );
    let on_file = std::fs::read_to_string(&path).unwrap();
    let (mut fake, now) = timed(Duration::from_secs(10));
    let mut cache = EvaluationCache::open(&log, fixture::cache_scope()).unwrap();
    let out = run(&wall, &mut fake, &now, &path, Some(&mut cache));
    assert_eq!((fake.calls, out.evaluations), (0, 0));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), on_file);
}
