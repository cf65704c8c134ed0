//! Tests of the search without a GPU: operator properties over thousands of seeded
//! cases, strategy determinism, exact budgets, the cache's crash and schema
//! behaviour, and replay of the synthetic landscape fixture.

use crate::*;
use evo_genome::{Gene, Genome, GenomeFile, GenomeId, HeadDim, Target};
use evo_lineage::Operator;
use evo_record::{Evaluation, Status};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

mod cache;
mod config;
mod fixture;
mod guided;
mod islands;
mod landscape;
mod passes;
mod steady;
mod wall;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/synthetic-landscape")
}

fn named_genomes() -> Vec<GenomeFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes");
    ["v3", "v5", "v6a", "v7a", "phase4", "phase6", "fa2"]
        .iter()
        .map(|n| GenomeFile::load(&dir.join(format!("{n}.toml"))).unwrap())
        .collect()
}

/// An evaluator answering from the synthetic model (any genome), counting calls.
struct FakeEvaluator {
    evaluated: usize,
    calls: usize,
    /// Seconds each evaluation takes on the fake clock.
    clock: Option<(Rc<Cell<Duration>>, Duration)>,
}

impl FakeEvaluator {
    fn new() -> FakeEvaluator {
        FakeEvaluator {
            evaluated: 0,
            calls: 0,
            clock: None,
        }
    }
}

impl Evaluator for FakeEvaluator {
    fn device(&self) -> String {
        fixture::DEVICE.into()
    }
    fn template_hash(&self) -> String {
        "t".into()
    }
    fn toolchain(&self) -> String {
        "tc".into()
    }
    fn evaluate(&mut self, batch: &[Genome]) -> Result<Vec<Evaluation>, EvaluatorError> {
        self.calls += 1;
        self.evaluated += batch.len();
        if let Some((now, per)) = &self.clock {
            now.set(now.get() + *per * batch.len() as u32);
        }
        Ok(batch
            .iter()
            .map(|g| fixture::synthetic_evaluation(g, HeadDim::D64, Target::Sm90))
            .collect())
    }
    fn describe(&self) -> String {
        "fake".into()
    }
}

struct FakeClock(Rc<Cell<Duration>>);

impl Clock for FakeClock {
    fn elapsed(&self) -> Duration {
        self.0.get()
    }
}

fn config(strategy: StrategyKind, budget: Budget, seed: u64) -> SearchConfig {
    SearchConfig {
        strategy,
        params: EvolutionParams::default(),
        budget,
        seed,
        seeds: named_genomes(),
        meta: evo_lineage::LineageMeta::default(),
        quiet: true,
        model: None,
    }
}

#[test]
fn gene_discriminants_follow_canonical_order() {
    // `SearchSpace` indexes its per-gene tables with `gene as usize`.
    for (i, gene) in Gene::ALL.into_iter().enumerate() {
        assert_eq!(gene as usize, i);
    }
}

/// Checks that every `Mutate` moved an ordered gene to a neighbouring allowed allele.
fn check_mutation_steps(space: &SearchSpace, parent: &Genome, ops: &[Operator]) {
    let mut g = *parent;
    for op in ops {
        if let Operator::Mutate { gene, from, to } = op {
            assert_eq!(&g.allele_label(*gene), from);
            let labels = gene.allele_labels();
            let to_index = labels.iter().position(|l| l == to).unwrap();
            if gene.is_ordered() {
                let allowed = space.allowed(*gene);
                let a = allowed
                    .iter()
                    .position(|&x| x == g.allele_index(*gene))
                    .unwrap();
                let b = allowed.iter().position(|&x| x == to_index).unwrap();
                assert_eq!(a.abs_diff(b), 1, "{gene} {from}→{to} is not a neighbour");
            }
            assert_ne!(from, to);
            g = g.with_allele(*gene, to_index);
        }
    }
}

fn operator_properties(space: &SearchSpace, cases: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..cases {
        let a = space.sample_valid(&mut rng).unwrap();
        let b = space.sample_valid(&mut rng).unwrap();

        let (m, ops) = mutate(&a, space, &mut rng).unwrap();
        assert!(
            space.admits(&m),
            "mutate gave an inadmissible genome: {}",
            m.summary()
        );
        assert!(!ops.is_empty());
        check_mutation_steps(space, &a, &ops);
        assert_ne!(m, a, "a mutation that repair undid entirely: {ops:?}");

        let (c, ops) = crossover(&a, &b, space, &mut rng).unwrap();
        assert!(space.admits(&c));
        assert_eq!(ops[0], Operator::Crossover { other: b.id() });

        // Repair of anything (valid or not, in the space or not).
        let wild = evo_genome::space::random_genome(&mut rng);
        let (r, ops) = repair(&wild, space, &mut rng).unwrap();
        assert!(space.admits(&r), "repair failed on {}", wild.summary());
        // Genes that do not shape r's family's kernel are reset silently (canonical form).
        assert_eq!(
            ops.len(),
            wild.diff(&r).iter().filter(|g| g.applies(r.family)).count(),
            "every change is reported once"
        );
        let (again, none) = repair(&r, space, &mut rng).unwrap();
        assert_eq!((again, none.len()), (r, 0), "repair is idempotent");
        let (same, none) = repair(&a, space, &mut rng).unwrap();
        assert_eq!(
            (same, none.len()),
            (a, 0),
            "repair of a valid genome is the identity"
        );
    }
}

/// 250 random cases per device and head dim, every check on each: repair in the full
/// space walks the rules over combinations of changes (some 15 ms a case), and 4 x 1000
/// cases were a minute of the suite's CPU. The sub-space test below runs 2000.
#[test]
fn operators_keep_genomes_valid_in_the_full_space() {
    for (i, (d, t)) in [
        (HeadDim::D64, Target::Sm89),
        (HeadDim::D128, Target::Sm89),
        (HeadDim::D64, Target::Sm90),
        (HeadDim::D128, Target::Sm90),
    ]
    .into_iter()
    .enumerate()
    {
        operator_properties(&SearchSpace::full(d, t), 250, i as u64);
    }
}

#[test]
fn operators_stay_inside_a_sub_space() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    operator_properties(landscape.space(), 2000, 99);
}

#[test]
fn repair_changes_the_fewest_genes() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let space = landscape.space();
    let points = space.valid_points().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut repaired_invalid = 0;
    for _ in 0..500 {
        let g = space.sample(&mut rng);
        let (r, _) = repair(&g, space, &mut rng).unwrap();
        let best = points.iter().map(|p| g.diff(p).len()).min().unwrap();
        assert_eq!(
            g.diff(&r).len(),
            best,
            "repair of {} is not nearest",
            g.summary()
        );
        repaired_invalid += usize::from(!space.is_valid(&g));
    }
    assert!(
        repaired_invalid > 5,
        "the fixture has invalid points to repair"
    );
}

#[test]
fn repair_is_deterministic_given_the_rng() {
    let space = SearchSpace::full(HeadDim::D128, Target::Sm89);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..200 {
        let g = evo_genome::space::random_genome(&mut rng);
        let s: u64 = rng.random();
        let one = repair(&g, &space, &mut ChaCha8Rng::seed_from_u64(s)).unwrap();
        let two = repair(&g, &space, &mut ChaCha8Rng::seed_from_u64(s)).unwrap();
        assert_eq!(one, two);
    }
}

#[test]
fn dedup_drops_seen_and_repeated_genomes() {
    let g = Genome::baseline();
    let h = g.with_allele(Gene::Exp, 1);
    let k = g.with_allele(Gene::SplitKv, 2);
    let cand = |genome: Genome| Candidate {
        genome,
        operators: vec![Operator::Random],
        parents: vec![],
        name: None,
    };
    let seen: HashSet<_> = [h.id()].into();
    let kept = dedup(vec![cand(g), cand(h), cand(g), cand(k)], &seen);
    let kept: Vec<_> = kept.iter().map(|c| c.genome).collect();
    assert_eq!(kept, vec![g, k]);
}

#[test]
fn seeds_are_repaired_into_a_sub_space() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    for file in named_genomes() {
        let c = operators::seed(&file, landscape.space(), &mut rng).unwrap();
        assert!(landscape.space().admits(&c.genome), "{}", file.name);
        assert_eq!(
            c.operators[0],
            Operator::Seed {
                name: file.name.clone()
            }
        );
        assert!(
            landscape.get(&c.genome.id()).is_some(),
            "seed {} lands on a recorded point",
            file.name
        );
    }
}

fn replay_search(strategy: StrategyKind, budget: Budget, seed: u64) -> SearchOutcome {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let mut evaluator = LandscapeEvaluator::new(landscape.clone());
    search(
        &config(strategy, budget, seed),
        landscape.space(),
        &mut evaluator,
        Sinks::default(),
        &WallClock::start(),
    )
    .unwrap()
}

#[test]
fn same_seed_same_lineage_byte_for_byte() {
    for strategy in [
        StrategyKind::Evolutionary,
        StrategyKind::Random,
        StrategyKind::Exhaustive,
    ] {
        let one = replay_search(strategy, Budget::Evaluations(60), 42)
            .lineage
            .to_json();
        let two = replay_search(strategy, Budget::Evaluations(60), 42)
            .lineage
            .to_json();
        assert_eq!(one, two, "{strategy}");
        if strategy != StrategyKind::Exhaustive {
            let other = replay_search(strategy, Budget::Evaluations(60), 43)
                .lineage
                .to_json();
            assert_ne!(one, other, "{strategy}: the seed matters");
        }
    }
}

#[test]
fn evolutionary_lineage_has_operators_and_parents() {
    let out = replay_search(StrategyKind::Evolutionary, Budget::Evaluations(80), 1);
    let l = &out.lineage;
    assert_eq!(l.len(), 80);
    let seeds = l
        .nodes()
        .filter(|n| matches!(n.operators[0], Operator::Seed { .. }))
        .count();
    assert!(seeds >= 1);
    let children: Vec<_> = l
        .nodes()
        .filter(|n| l.primary_parent(&n.id).is_some())
        .collect();
    assert!(
        children.len() >= 80 - 16,
        "after generation 0 every candidate has a parent"
    );
    for c in children {
        assert!(c.generation >= 1);
        assert!(c
            .operators
            .iter()
            .any(|o| matches!(o, Operator::Mutate { .. } | Operator::Crossover { .. })));
    }
    assert!(out.best_after.windows(2).all(|w| w[1] <= w[0]));
}

#[test]
fn evaluation_budget_is_exact() {
    for strategy in [StrategyKind::Evolutionary, StrategyKind::Random] {
        for n in [1, 5, 16, 17, 33, 100] {
            let mut fake = FakeEvaluator::new();
            let out = search(
                &config(strategy, Budget::Evaluations(n), 3),
                &SearchSpace::full(HeadDim::D64, Target::Sm90),
                &mut fake,
                Sinks::default(),
                &WallClock::start(),
            )
            .unwrap();
            assert_eq!(
                (fake.evaluated, out.evaluations),
                (n, n),
                "{strategy} budget {n}"
            );
            assert_eq!(out.stop, StopReason::Budget);
        }
    }
}

#[test]
fn wall_budget_starts_no_evaluation_after_the_deadline() {
    let now = Rc::new(Cell::new(Duration::ZERO));
    let mut fake = FakeEvaluator::new();
    fake.clock = Some((now.clone(), Duration::from_millis(700)));
    let out = search(
        &config(
            StrategyKind::Evolutionary,
            Budget::Wall(Duration::from_secs(10)),
            3,
        ),
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        &mut fake,
        Sinks::default(),
        &FakeClock(now.clone()),
    )
    .unwrap();
    // 0.7 s each: 14 evaluations end by 9.8 s, a 15th would end at 10.5 s.
    assert_eq!(out.evaluations, 14);
    assert!(now.get() <= Duration::from_secs(10), "{:?}", now.get());
    assert!(
        fake.calls < 14,
        "evaluations are batched once the rate is known"
    );
}

#[test]
fn exhaustive_walks_the_whole_sub_space_and_finds_the_optimum() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let valid = landscape.space().valid_points().unwrap().len();
    let out = replay_search(StrategyKind::Exhaustive, Budget::Evaluations(10_000), 0);
    assert_eq!(out.evaluations, valid);
    assert_eq!(out.stop, StopReason::SpaceExhausted);
    let (best, us) = landscape.optimum().unwrap();
    let champion = out.lineage.champion().unwrap();
    assert_eq!(
        (&champion.id, champion.score_us()),
        (&best.genome_id, Some(us))
    );
    let err = Strategy::new(
        StrategyKind::Exhaustive,
        &EvolutionParams::default(),
        vec![],
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        None,
    )
    .err()
    .unwrap();
    assert!(
        err.to_string()
            .contains("exhaustive walk needs a declared sub-space"),
        "{err}"
    );
}

use crate::strategy::Strategy;

#[test]
fn random_search_never_repeats_and_exhausts_small_spaces() {
    let out = replay_search(StrategyKind::Random, Budget::Evaluations(10_000), 9);
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    assert_eq!(
        out.evaluations,
        landscape.space().valid_points().unwrap().len()
    );
    assert_eq!(out.stop, StopReason::SpaceExhausted);
}

#[test]
fn generations_limit_stops_the_search() {
    let mut c = config(StrategyKind::Evolutionary, Budget::Evaluations(1000), 2);
    c.params.generations = Some(2);
    let mut fake = FakeEvaluator::new();
    let out = search(
        &c,
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        &mut fake,
        Sinks::default(),
        &WallClock::start(),
    )
    .unwrap();
    assert_eq!(out.stop, StopReason::Generations);
    assert_eq!(out.evaluations, 16 + 14 + 14);
}

#[test]
fn synthetic_fixture_matches_its_generator() {
    fixture::check_or_write(&fixture_dir());
}

#[test]
fn evaluator_answers_out_of_order_are_refused() {
    struct Shuffled;
    impl Evaluator for Shuffled {
        fn device(&self) -> String {
            "d".into()
        }
        fn template_hash(&self) -> String {
            String::new()
        }
        fn toolchain(&self) -> String {
            String::new()
        }
        fn evaluate(&mut self, batch: &[Genome]) -> Result<Vec<Evaluation>, EvaluatorError> {
            Ok(batch
                .iter()
                .rev()
                .map(|g| Evaluation::failed(*g, "d", Status::Invalid, ""))
                .collect())
        }
        fn describe(&self) -> String {
            "shuffled".into()
        }
    }
    let err = search(
        &config(StrategyKind::Random, Budget::Evaluations(4), 0),
        &SearchSpace::full(HeadDim::D64, Target::Sm90),
        &mut Shuffled,
        Sinks::default(),
        &WallClock::start(),
    )
    .unwrap_err();
    assert!(matches!(err, SearchError::Mismatch { .. }), "{err}");
}

#[test]
fn strategies_comparison_reports_fractions_of_the_optimum() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let params = EvolutionParams::default();
    let cmp = compare_strategies(
        &landscape,
        &[
            Contender::new(StrategyKind::Evolutionary, &params),
            Contender::new(StrategyKind::Random, &params),
        ],
        6,
        &[10, 25, 50],
    )
    .unwrap()
    .unwrap();
    for row in &cmp.rows {
        assert!(
            row.median_fraction.iter().all(|f| (0.0..=1.0).contains(f)),
            "{row:?}"
        );
        assert!(
            row.median_fraction.windows(2).all(|w| w[0] <= w[1]),
            "{row:?}"
        );
        // Seeds at the optimum only grow, and agree with the median: more than half
        // of them there puts the median there, and a median there needs half of them.
        assert!(row.at_optimum.windows(2).all(|w| w[0] <= w[1]), "{row:?}");
        for (&n, &f) in row.at_optimum.iter().zip(&row.median_fraction) {
            assert!(n <= 6, "{row:?}");
            if n * 2 > 6 {
                assert_eq!(f, 1.0, "{row:?}");
            }
            if f == 1.0 {
                assert!(n * 2 >= 6, "{row:?}");
            }
        }
    }
    // Some evolutionary seed finds the small fixture's optimum within 50 evaluations:
    // a count stuck at zero would fail here.
    assert!(cmp.rows[0].at_optimum[2] > 0, "{:?}", cmp.rows[0]);
    let md = cmp.to_markdown();
    assert!(md.contains("| strategy | 10 | 25 | 50 |"), "{md}");
    assert!(
        md.contains("Seeds (of 6) that had found the optimum"),
        "{md}"
    );
}
