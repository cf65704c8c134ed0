//! The steady-state search on the CPU: candidates kept in flight, the budget, and the
//! replay of a recorded order of answers (by an evaluator that follows it, and from
//! the cache of an earlier run, whole or cut short).

use super::*;

/// Answers, of the genomes waiting, one drawn from its own seeded RNG (as GPUs finish
/// out of order), from the synthetic landscape; records the order and the most waiting.
struct OutOfOrder {
    inner: LandscapeEvaluator,
    rng: ChaCha8Rng,
    order: Vec<GenomeId>,
    most_waiting: usize,
}

impl OutOfOrder {
    fn new(seed: u64) -> OutOfOrder {
        OutOfOrder {
            inner: LandscapeEvaluator::new(Landscape::load(&fixture_dir()).unwrap()),
            rng: ChaCha8Rng::seed_from_u64(seed),
            order: Vec::new(),
            most_waiting: 0,
        }
    }
}

/// Answers, of the genomes waiting, the one that came first in a recorded order.
struct InOrder {
    inner: LandscapeEvaluator,
    order: Vec<GenomeId>,
}

macro_rules! delegate_to_inner {
    () => {
        fn device(&self) -> String {
            self.inner.device()
        }
        fn template_hash(&self) -> String {
            self.inner.template_hash()
        }
        fn toolchain(&self) -> String {
            self.inner.toolchain()
        }
        fn evaluate(&mut self, batch: &[Genome]) -> Result<Vec<Evaluation>, EvaluatorError> {
            self.inner.evaluate(batch)
        }
        fn describe(&self) -> String {
            self.inner.describe()
        }
    };
}

impl Evaluator for OutOfOrder {
    delegate_to_inner!();
    fn next_answer(&mut self, waiting: &[Genome]) -> Result<Evaluation, EvaluatorError> {
        self.most_waiting = self.most_waiting.max(waiting.len());
        let pick = waiting[self.rng.random_range(0..waiting.len())];
        self.order.push(pick.id());
        self.inner.next_answer(&[pick])
    }
}

impl Evaluator for InOrder {
    delegate_to_inner!();
    fn next_answer(&mut self, waiting: &[Genome]) -> Result<Evaluation, EvaluatorError> {
        let pick = self
            .order
            .iter()
            .find_map(|id| waiting.iter().find(|g| g.id() == *id))
            .ok_or_else(|| EvaluatorError::new("no waiting genome is in the recorded order"))?;
        self.inner.next_answer(&[*pick])
    }
}

fn steady_config(budget: Budget, seed: u64, in_flight: usize) -> SearchConfig {
    let mut c = config(StrategyKind::Evolutionary, budget, seed);
    c.params.steady = true;
    c.params.in_flight = Some(in_flight);
    c
}

fn steady_search(
    config: &SearchConfig,
    evaluator: &mut dyn Evaluator,
    cache: Option<&mut EvaluationCache>,
) -> SearchOutcome {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    search(
        config,
        landscape.space(),
        evaluator,
        Sinks {
            cache,
            ..Sinks::default()
        },
        &WallClock::start(),
    )
    .unwrap()
}

/// The genome ids of a cache file, in the order written.
fn recorded_order(path: &Path) -> Vec<GenomeId> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<CacheRecord>(l)
                .unwrap()
                .key
                .genome_id
        })
        .collect()
}

fn landscape_scope() -> CacheScope {
    Landscape::load(&fixture_dir()).unwrap().meta.scope()
}

#[test]
fn a_steady_search_keeps_its_candidates_in_flight_and_spends_the_budget_exactly() {
    let mut evaluator = OutOfOrder::new(1);
    let out = steady_search(
        &steady_config(Budget::Evaluations(120), 7, 6),
        &mut evaluator,
        None,
    );
    assert_eq!((out.evaluations, out.stop), (120, StopReason::Budget));
    let distinct: HashSet<&GenomeId> = evaluator.order.iter().collect();
    assert_eq!((evaluator.order.len(), distinct.len()), (120, 120));
    assert_eq!(evaluator.most_waiting, 6, "never more than in_flight");
    // The first population (the named seeds, then random genomes) is generation 0; each
    // later generation holds `population - elites` children.
    let generations: Vec<u32> = out.lineage.nodes().map(|n| n.generation).collect();
    assert_eq!(generations.iter().filter(|&&g| g == 0).count(), 16);
    assert_eq!(generations.iter().filter(|&&g| g == 1).count(), 14);
    assert!(out
        .lineage
        .nodes()
        .filter(|n| n.generation > 0)
        .all(|n| !n.operators.is_empty()));
    // A generation limit stops the breeding, and the search ends when the last
    // candidate bred has answered.
    let mut limited = steady_config(Budget::Evaluations(1000), 7, 6);
    limited.params.generations = Some(2);
    let out = steady_search(&limited, &mut OutOfOrder::new(1), None);
    assert_eq!(out.stop, StopReason::Generations);
    assert_eq!(out.evaluations, 16 + 2 * 14);
}

#[test]
fn the_same_seed_and_order_of_answers_give_the_same_lineage() {
    let config = steady_config(Budget::Evaluations(100), 3, 8);
    let mut first = OutOfOrder::new(1);
    let one = steady_search(&config, &mut first, None).lineage.to_json();
    let mut again = OutOfOrder::new(1);
    assert_eq!(
        one,
        steady_search(&config, &mut again, None).lineage.to_json()
    );
    // Another evaluator that answers in the recorded order: the same lineage.
    let mut replay = InOrder {
        inner: LandscapeEvaluator::new(Landscape::load(&fixture_dir()).unwrap()),
        order: first.order.clone(),
    };
    assert_eq!(
        one,
        steady_search(&config, &mut replay, None).lineage.to_json()
    );
    // Another order of answers is another search.
    let other = steady_search(&config, &mut OutOfOrder::new(2), None)
        .lineage
        .to_json();
    assert_ne!(one, other, "the order of answers matters");
    // So is the generational search.
    let mut plain = LandscapeEvaluator::new(Landscape::load(&fixture_dir()).unwrap());
    let generational = config_generational(&config);
    assert_ne!(
        one,
        steady_search(&generational, &mut plain, None)
            .lineage
            .to_json()
    );
}

fn config_generational(steady: &SearchConfig) -> SearchConfig {
    let mut c = steady.clone();
    c.params.steady = false;
    c.params.in_flight = None;
    c
}

/// The cache records the answers in the order they came; a re-run takes them in that
/// order (no evaluation at all) and a run resumed from a cache cut short replays what
/// it holds and goes on: both give the first run's lineage.
#[test]
fn a_rerun_replays_the_order_its_cache_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let config = steady_config(Budget::Evaluations(90), 5, 8);
    let mut first = OutOfOrder::new(4);
    let mut cache = EvaluationCache::open(&path, landscape_scope()).unwrap();
    let one = steady_search(&config, &mut first, Some(&mut cache));
    assert_eq!(one.cache_hits, 0);
    assert_eq!(
        recorded_order(&path),
        first.order,
        "written in answer order"
    );

    let mut fake = FakeEvaluator::new();
    let mut cache = EvaluationCache::open(&path, landscape_scope()).unwrap();
    let rerun = steady_search(&config, &mut fake, Some(&mut cache));
    assert_eq!((fake.calls, rerun.cache_hits), (0, 90));
    assert_eq!(one.lineage.to_json(), rerun.lineage.to_json());

    // Killed after 40 answers: the candidates then waiting are bred again and the
    // evaluator goes on with them in the same order as the first run's.
    let cut = dir.path().join("cut.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: String = text.split_inclusive('\n').take(40).collect();
    std::fs::write(&cut, kept).unwrap();
    let mut cache = EvaluationCache::open(&cut, landscape_scope()).unwrap();
    let mut rest = InOrder {
        inner: LandscapeEvaluator::new(Landscape::load(&fixture_dir()).unwrap()),
        order: first.order.clone(),
    };
    let resumed = steady_search(&config, &mut rest, Some(&mut cache));
    assert_eq!(resumed.cache_hits, 40);
    assert_eq!(one.lineage.to_json(), resumed.lineage.to_json());
    assert_eq!(recorded_order(&cut), first.order);
}

#[test]
fn a_steady_wall_budget_starts_no_evaluation_after_the_deadline() {
    let now = Rc::new(Cell::new(Duration::ZERO));
    let mut fake = FakeEvaluator::new();
    fake.clock = Some((now.clone(), Duration::from_millis(700)));
    let mut config = steady_config(Budget::Wall(Duration::from_secs(10)), 3, 4);
    config.seeds = Vec::new();
    let out = search(
        &config,
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        &mut fake,
        Sinks::default(),
        &FakeClock(now.clone()),
    )
    .unwrap();
    // One evaluation measures the rate; then no more are kept in flight than end by
    // the deadline at 0.7 s each.
    assert_eq!(out.evaluations, 14);
    assert!(now.get() <= Duration::from_secs(10), "{:?}", now.get());
}

#[test]
fn steady_settings_are_checked() {
    let steady =
        super::config::GOOD.replace("elites = 2", "elites = 2\nsteady = true\nin_flight = 12");
    let c = super::config::write_config(&steady).unwrap();
    assert!(c.evolutionary.steady);
    assert_eq!(c.evolutionary.in_flight, Some(12));
    let err = |text: &str| super::config::write_config(text).unwrap_err().to_string();
    assert!(
        err(&steady.replace("steady = true", "steady = true\npipeline = true"))
            .contains("field `evolutionary.steady`: steady = true and pipeline = true"),
    );
    assert!(err(&steady.replace("in_flight = 12", "in_flight = 0"))
        .contains("field `evolutionary.in_flight`: in_flight must be at least 1"));
    assert!(err(&steady.replace("\"evolutionary\"", "\"random\""))
        .contains("a steady-state search breeds from a population"),);
    let island = format!(
        "{steady}\n[island]\nisland = 0\nislands = 2\nexchange = \"x\"\nevery = 2\nmigrants = 2\n"
    );
    assert!(err(&island).contains("a steady-state search (steady = true) has none"));
}
