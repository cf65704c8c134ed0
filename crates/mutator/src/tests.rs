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

mod fixture;
mod steady;

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
        operator_properties(&SearchSpace::full(d, t), 1000, i as u64);
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

fn scope() -> CacheScope {
    CacheScope {
        objective: "B1 H8 L512 D64 f16".into(),
        device: fixture::DEVICE.into(),
        template_hash: "t".into(),
        toolchain: "tc".into(),
    }
}

#[test]
fn second_run_reuses_the_cache_and_gives_the_same_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let space = SearchSpace::full(HeadDim::D64, Target::Sm90);
    let run = |evaluator: &mut FakeEvaluator| {
        let mut cache = EvaluationCache::open(&path, scope()).unwrap();
        let out = search(
            &config(StrategyKind::Evolutionary, Budget::Evaluations(40), 8),
            &space,
            evaluator,
            Sinks {
                cache: Some(&mut cache),
                ..Sinks::default()
            },
            &WallClock::start(),
        )
        .unwrap();
        (out, cache.report.reusable)
    };
    let mut first = FakeEvaluator::new();
    let (one, loaded) = run(&mut first);
    assert_eq!((first.evaluated, one.cache_hits, loaded), (40, 0, 0));
    let mut second = FakeEvaluator::new();
    let (two, loaded) = run(&mut second);
    assert_eq!((second.evaluated, two.cache_hits, loaded), (0, 40, 40));
    assert_eq!(one.lineage.to_json(), two.lineage.to_json());
    // A larger budget reuses the 40 and evaluates only the rest.
    let mut third = FakeEvaluator::new();
    let mut cache = EvaluationCache::open(&path, scope()).unwrap();
    let out = search(
        &config(StrategyKind::Evolutionary, Budget::Evaluations(60), 8),
        &space,
        &mut third,
        Sinks {
            cache: Some(&mut cache),
            ..Sinks::default()
        },
        &WallClock::start(),
    )
    .unwrap();
    assert_eq!((third.evaluated, out.cache_hits), (20, 40));
}

fn some_evaluations(n: usize) -> Vec<Evaluation> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let space = SearchSpace::full(HeadDim::D64, Target::Sm90);
    (0..n)
        .map(|_| {
            fixture::synthetic_evaluation(
                &space.sample_valid(&mut rng).unwrap(),
                HeadDim::D64,
                Target::Sm90,
            )
        })
        .collect()
}

#[test]
fn cache_resumes_after_a_cut_short_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let evals = some_evaluations(5);
    {
        let mut cache = EvaluationCache::open(&path, scope()).unwrap();
        for e in &evals {
            cache.insert(e.clone()).unwrap();
        }
    }
    // kill -9 in the middle of writing the fifth record.
    let text = std::fs::read_to_string(&path).unwrap();
    let cut = text.len() - 40;
    std::fs::write(&path, &text[..cut]).unwrap();
    let mut cache = EvaluationCache::open(&path, scope()).unwrap();
    assert_eq!(cache.len(), 4);
    assert_eq!(cache.report.warnings.len(), 1);
    assert!(
        cache.report.warnings[0].contains(":5: skipped a cut-short last line"),
        "{:?}",
        cache.report.warnings
    );
    cache.insert(evals[4].clone()).unwrap();
    drop(cache);
    let cache = EvaluationCache::open(&path, scope()).unwrap();
    assert_eq!(
        (cache.len(), cache.report.warnings.len()),
        (5, 0),
        "the resumed file is clean"
    );
    assert_eq!(cache.get(&evals[4].genome_id), Some(&evals[4]));

    // A record that lost only its newline is kept, and the next one starts a new line.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.trim_end()).unwrap();
    let mut cache = EvaluationCache::open(&path, scope()).unwrap();
    assert_eq!(cache.len(), 5);
    let extra = some_evaluations(6).pop().unwrap();
    cache.insert(extra).unwrap();
    assert_eq!(EvaluationCache::open(&path, scope()).unwrap().len(), 6);
}

#[test]
fn cache_refuses_a_damaged_middle_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    std::fs::write(&path, "{\"not\": \"a record\"}\n{}\n").unwrap();
    let err = EvaluationCache::open(&path, scope())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("evaluations.jsonl:1: not a cache record"),
        "{err}"
    );
}

#[test]
fn cache_loads_records_of_an_older_schema() {
    // Written by hand as the first version wrote records: no `recorded_unix`, no
    // template hash or toolchain in the key, and an evaluation without the fields
    // added later (`timings`, `resources`, `detail`).
    let g = Genome::baseline();
    let old = format!(
        r#"{{"key":{{"genome_id":"{id}","objective":"B1 H8 L512 D64 f16","device":"{dev}"}},"evaluation":{{"genome_id":"{id}","genome":{genome},"device":"{dev}","status":"ok","score_us":12.5}}}}"#,
        id = g.id(),
        dev = fixture::DEVICE,
        genome = serde_json::to_string(&g).unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    std::fs::write(&path, format!("{old}\n")).unwrap();
    let old_scope = CacheScope {
        template_hash: String::new(),
        toolchain: String::new(),
        ..scope()
    };
    let cache = EvaluationCache::open(&path, old_scope).unwrap();
    let e = cache.get(&g.id()).unwrap();
    assert_eq!(
        (e.status, e.score_us, e.timings.len(), e.detail.as_str()),
        (Status::Ok, Some(12.5), 0, "")
    );
    // Under today's scope (a known template and toolchain) it loads but is not reused.
    let cache = EvaluationCache::open(&path, scope()).unwrap();
    assert_eq!((cache.len(), cache.report.other_scope), (0, 1));
}

#[test]
fn cache_refuses_to_mix_devices() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let mut cache = EvaluationCache::open(&path, scope()).unwrap();
    cache.insert(some_evaluations(1).pop().unwrap()).unwrap();
    drop(cache);
    let other = CacheScope {
        device: "NVIDIA L4".into(),
        ..scope()
    };
    let err = EvaluationCache::open(&path, other).unwrap_err().to_string();
    assert!(
        err.contains(":1: this cache holds timings from `Synthetic GPU"),
        "{err}"
    );
    assert!(err.contains("measures on `NVIDIA L4`"), "{err}");
}

#[test]
fn failures_are_cached_with_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let mut cache = EvaluationCache::open(&path, scope()).unwrap();
    let g = Genome::baseline();
    cache
        .insert(Evaluation::failed(
            g,
            fixture::DEVICE,
            Status::Timeout,
            "no answer in 10 s",
        ))
        .unwrap();
    drop(cache);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"status\":\"timeout\""), "{text}");
    let cache = EvaluationCache::open(&path, scope()).unwrap();
    assert_eq!(cache.get(&g.id()).unwrap().status, Status::Timeout);
}

#[test]
fn landscape_replays_only_what_was_recorded() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    assert!(landscape.warnings.is_empty(), "{:?}", landscape.warnings);
    assert_eq!(
        landscape.banner(),
        format!(
            "replaying {} measurements recorded on {} on 2026-11-22 (no CUDA device here)",
            landscape.len(),
            fixture::DEVICE
        )
    );
    let mut evaluator = LandscapeEvaluator::new(landscape.clone());
    let inside = landscape.space().valid_points().unwrap()[0];
    assert_eq!(
        evaluator.evaluate(&[inside]).unwrap()[0].genome_id,
        inside.id()
    );
    let outside = inside.with_allele(Gene::SplitKv, 3);
    let err = evaluator
        .evaluate(&[inside, outside])
        .unwrap_err()
        .to_string();
    assert!(err.contains("was not measured in the landscape"), "{err}");
    assert!(err.contains(&outside.id().to_string()), "{err}");
}

#[test]
fn a_gzipped_landscape_loads_like_the_plain_one() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture_dir().join("landscape.toml"),
        dir.path().join("landscape.toml"),
    )
    .unwrap();
    let text = std::fs::read(fixture_dir().join("evaluations.jsonl")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.path().join("evaluations.jsonl.gz")).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(&text).unwrap();
    gz.finish().unwrap();
    let plain = Landscape::load(&fixture_dir()).unwrap();
    let zipped = Landscape::load(dir.path()).unwrap();
    assert_eq!(zipped.len(), plain.len());
    assert_eq!(
        zipped.optimum().map(|(e, us)| (e.genome_id.clone(), us)),
        plain.optimum().map(|(e, us)| (e.genome_id.clone(), us))
    );
    for g in plain.space().valid_points().unwrap() {
        assert_eq!(zipped.get(&g.id()), plain.get(&g.id()));
    }
    // Neither file: the error names the plain file and says how to record one.
    std::fs::remove_file(dir.path().join("evaluations.jsonl.gz")).unwrap();
    let err = Landscape::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("evaluations.jsonl") && err.contains("evo landscape"),
        "{err}"
    );
}

/// A sub-space over both families: each family counts only the genes that shape its
/// kernels, a point of one family keeps the other family's genes at baseline, and a
/// genome is inside when the genes of its own family are.
#[test]
fn a_two_family_sub_space_multiplies_only_the_genes_of_each_family() {
    let text = format!(
        "[base]\n{}\n[genes]\nfamily = [\"ampere\", \"hopper\"]\nqk_math = [\"wmma\", \"mma\"]\n\
         pv_math = [\"wmma\", \"mma\"]\nblock_n = [64, 128]\nconsumer_wgs = [1, 2, 3]\n\
         pingpong = [\"off\", \"on\"]\n",
        toml::to_string(&named_genomes()[6].genes).unwrap()
    );
    let sub: SubSpace = toml::from_str(&text).unwrap();
    let space = SearchSpace::sub(&sub, HeadDim::D64, Target::Sm90).unwrap();
    // Ampere: qk x pv x block_n = 8; Hopper: block_n x consumers x ping-pong = 12.
    assert_eq!(space.size(), 8 + 12);
    let points: Vec<Genome> = space.points().collect();
    assert_eq!(points.len(), 20);
    let ids: HashSet<GenomeId> = points.iter().map(|g| g.id()).collect();
    assert_eq!(ids.len(), 20, "every point is a distinct kernel");
    for g in &points {
        assert_eq!(*g, g.canonical(), "{}", g.summary());
        assert!(space.contains(g), "{}", g.summary());
    }
    let valid = space.valid_points().unwrap();
    assert!(valid.iter().all(|g| g.is_valid(HeadDim::D64, Target::Sm90)));
    assert_eq!(
        valid.len(),
        points
            .iter()
            .filter(|g| g.is_valid(HeadDim::D64, Target::Sm90))
            .count()
    );
    assert!(valid.iter().any(|g| g.family == evo_genome::Family::Hopper));
    assert!(valid.iter().any(|g| g.family == evo_genome::Family::Ampere));
    // A Hopper genome whose Ampere genes lie outside the sub-space is still inside it
    // (they make no kernel); one whose Hopper gene does not is not.
    let hopper = *valid
        .iter()
        .find(|g| g.family == evo_genome::Family::Hopper)
        .unwrap();
    let scalar = Gene::QkMath
        .allele_labels()
        .iter()
        .position(|l| l == "scalar")
        .unwrap();
    assert!(space.contains(&hopper.with_allele(Gene::QkMath, scalar)));
    let tma_only = |g: &Genome| g.allele_label(Gene::HopperLoad);
    let other_load = (0..Gene::HopperLoad.allele_count())
        .find(|&i| Gene::HopperLoad.allele_labels()[i] != tma_only(&hopper))
        .unwrap();
    assert!(!space.contains(&hopper.with_allele(Gene::HopperLoad, other_load)));
    // And the operators stay inside it.
    operator_properties(&space, 300, 11);
}

#[test]
fn landscape_of_mixed_devices_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture_dir().join("landscape.toml"),
        dir.path().join("landscape.toml"),
    )
    .unwrap();
    let mut e = some_evaluations(1).pop().unwrap();
    e.device = "NVIDIA H100 80GB HBM3".into();
    std::fs::write(
        dir.path().join("evaluations.jsonl"),
        serde_json::to_string(&e).unwrap() + "\n",
    )
    .unwrap();
    let err = Landscape::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("evaluations.jsonl:1: measured on `NVIDIA H100 80GB HBM3`"),
        "{err}"
    );
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

fn write_config(text: &str) -> Result<ExperimentConfig, ConfigError> {
    ExperimentConfig::from_toml_str(text, Path::new("exp/experiment.toml"))
}

const GOOD: &str = r#"name = "t"
strategy = "evolutionary"
seed = 1
backend = "replay:somewhere"

[budget]
evaluations = 50

[evolutionary]
population = 8
elites = 2
"#;

#[test]
fn experiment_config_round_trips() {
    let c = write_config(GOOD).unwrap();
    assert_eq!(c.budget(), Budget::Evaluations(50));
    assert_eq!(c.backend(), Backend::Replay("somewhere".into()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("experiment.toml");
    c.save(&path).unwrap();
    assert_eq!(ExperimentConfig::load(&path).unwrap(), c);
}

#[test]
fn bad_experiment_config_names_file_line_and_field() {
    let unknown = write_config(&GOOD.replace("elites = 2", "elites = 2\nmutation = 0.3"))
        .unwrap_err()
        .to_string();
    assert!(unknown.starts_with("exp/experiment.toml:12:"), "{unknown}");
    assert!(unknown.contains("unknown field `mutation`"), "{unknown}");
    let wrong_type = write_config(&GOOD.replace("seed = 1", "seed = \"one\""))
        .unwrap_err()
        .to_string();
    assert!(
        wrong_type.starts_with("exp/experiment.toml:3:"),
        "{wrong_type}"
    );
    let elites = write_config(&GOOD.replace("elites = 2", "elites = 8"))
        .unwrap_err()
        .to_string();
    assert_eq!(elites, "exp/experiment.toml:11: field `evolutionary.elites`: elites = 8 must be below population = 8");
    let backend = write_config(&GOOD.replace("replay:somewhere", "tpu"))
        .unwrap_err()
        .to_string();
    assert!(
        backend.starts_with("exp/experiment.toml:4: field `backend`"),
        "{backend}"
    );
    let both = write_config(&GOOD.replace("evaluations = 50", "evaluations = 50\nminutes = 3"))
        .unwrap_err()
        .to_string();
    assert!(both.contains("field `budget`: give exactly one"), "{both}");
    let strategy = write_config(&GOOD.replace("\"evolutionary\"", "\"annealing\""))
        .unwrap_err()
        .to_string();
    assert!(
        strategy.starts_with("exp/experiment.toml:2:") && strategy.contains("annealing"),
        "{strategy}"
    );
}

#[test]
fn sub_space_errors_name_gene_and_alleles() {
    let sub = |genes: &str| {
        let text = format!(
            "[base]\n{}\n[genes]\n{genes}\n",
            toml::to_string(&Genome::baseline()).unwrap()
        );
        let s: SubSpace = toml::from_str(&text).unwrap();
        SearchSpace::sub(&s, HeadDim::D64, Target::Sm90)
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(sub("warps = [2, 4]"), None);
    assert!(sub("wraps = [2]")
        .unwrap()
        .contains("`wraps` is not a gene"));
    let bad = sub("block_m = [48]").unwrap();
    assert!(
        bad.contains("`48` is not an allele of block_m; expected one of 16, 32, 64, 128"),
        "{bad}"
    );
    assert!(sub("exp = []").unwrap().contains("lists no allele"));
    assert!(sub("kv_load = [\"direct\", \"direct\"]")
        .unwrap()
        .contains("twice"));
}

fn island(k: u32, exchange: &Path) -> IslandConfig {
    IslandConfig {
        island: k,
        islands: 3,
        exchange: exchange.to_path_buf(),
        every: 2,
        migrants: 2,
    }
}

fn migrant(island: u32, generation: u32, mut evaluation: Evaluation, us: f64) -> Migrant {
    evaluation.status = Status::Ok;
    evaluation.score_us = Some(us);
    Migrant {
        island,
        generation,
        name: None,
        evaluation,
    }
}

#[test]
fn islands_take_the_best_unseen_elites_and_replay_their_intakes() {
    let dir = tempfile::tempdir().unwrap();
    let exchange = dir.path().join("exchange");
    let log = dir.path().join("island-0").join(MIGRANTS_FILE);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let e = some_evaluations(6);
    let one = Exchange::open(island(1, &exchange), &dir.path().join("one.jsonl")).unwrap();
    let two = Exchange::open(island(2, &exchange), &dir.path().join("two.jsonl")).unwrap();
    one.publish(
        1,
        vec![
            migrant(1, 1, e[0].clone(), 50.0),
            migrant(1, 1, e[1].clone(), 40.0),
        ],
    )
    .unwrap();
    two.publish(
        1,
        vec![
            migrant(2, 1, e[2].clone(), 45.0),
            migrant(2, 1, e[3].clone(), 30.0),
        ],
    )
    .unwrap();
    let mut zero = Exchange::open(island(0, &exchange), &log).unwrap();
    assert!(!zero.due(0) && zero.due(1) && !zero.due(2) && zero.due(3));
    // The best two over both islands, but not one this island has seen.
    let seen: HashSet<GenomeId> = [e[3].genome_id.clone()].into();
    let taken = zero.intake(1, &seen).unwrap();
    let ids: Vec<&GenomeId> = taken.iter().map(|m| &m.evaluation.genome_id).collect();
    assert_eq!(ids, [&e[1].genome_id, &e[2].genome_id]);
    assert_eq!((taken[0].island, taken[1].island), (1, 2));

    // Newer files appear; a reopened island still answers generation 1 from its log.
    one.publish(3, vec![migrant(1, 3, e[4].clone(), 10.0)])
        .unwrap();
    let mut zero = Exchange::open(island(0, &exchange), &log).unwrap();
    assert_eq!(zero.intake(1, &HashSet::new()).unwrap(), taken);
    let newer = zero.intake(3, &HashSet::new()).unwrap();
    assert_eq!(newer[0].evaluation.genome_id, e[4].genome_id);
    assert_eq!(newer[0].generation, 3);
    // Published files appear whole, by rename: no temporary file is left.
    let names: Vec<String> = std::fs::read_dir(exchange.join("island-1"))
        .unwrap()
        .map(|d| d.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("gen-")), "{names:?}");

    // A file that is not a publication is an error naming it.
    std::fs::write(exchange.join("island-2").join("gen-000009.json"), "{").unwrap();
    let err = zero.intake(5, &HashSet::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("gen-000009.json: not a file of published elites"),
        "{err}"
    );
}

/// Records what a pipelined search asks for ahead and then evaluates.
struct Recording {
    inner: LandscapeEvaluator,
    prefetched: Vec<Vec<GenomeId>>,
    evaluated: Vec<Vec<GenomeId>>,
}

impl Evaluator for Recording {
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
        self.evaluated.push(batch.iter().map(|g| g.id()).collect());
        self.inner.evaluate(batch)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn prefetch(&mut self, next: &[Genome]) {
        self.prefetched.push(next.iter().map(|g| g.id()).collect());
    }
}

fn pipelined_search(
    budget: usize,
    seed: u64,
    generations: Option<u32>,
) -> (SearchOutcome, Recording) {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let mut evaluator = Recording {
        inner: LandscapeEvaluator::new(landscape.clone()),
        prefetched: Vec::new(),
        evaluated: Vec::new(),
    };
    let mut config = config(
        StrategyKind::Evolutionary,
        Budget::Evaluations(budget),
        seed,
    );
    config.params.pipeline = true;
    config.params.generations = generations;
    let out = search(
        &config,
        landscape.space(),
        &mut evaluator,
        Sinks::default(),
        &WallClock::start(),
    )
    .unwrap();
    (out, evaluator)
}

/// The pipelined search: each batch from generation 2 on was announced to the evaluator
/// (prefetch) one batch ahead, exactly as it was then evaluated; the budget is exact,
/// generations are numbered in order, no genome is evaluated twice, and the same seed
/// gives the same lineage.
#[test]
fn a_pipelined_search_announces_each_generation_one_ahead() {
    let (out, rec) = pipelined_search(100, 5, None);
    assert_eq!(out.evaluations, 100);
    assert_eq!(out.stop, StopReason::Budget);
    let evaluated: Vec<GenomeId> = rec.evaluated.iter().flatten().cloned().collect();
    let distinct: HashSet<&GenomeId> = evaluated.iter().collect();
    assert_eq!((evaluated.len(), distinct.len()), (100, 100));
    // Generation 0 and 1 are bred after the one before them was measured; from then on
    // batch k + 1 was announced while batch k was still to be evaluated.
    assert!(rec.evaluated.len() >= 4, "{}", rec.evaluated.len());
    assert_eq!(rec.prefetched.len(), rec.evaluated.len() - 2);
    for (k, ahead) in rec.prefetched.iter().enumerate() {
        assert_eq!(ahead, &rec.evaluated[k + 2], "batch {}", k + 2);
    }
    let generations: Vec<u32> = out.lineage.nodes().map(|n| n.generation).collect();
    let last = *generations.iter().max().unwrap();
    assert_eq!(last as usize, rec.evaluated.len() - 1);
    let (again, _) = pipelined_search(100, 5, None);
    assert_eq!(out.lineage.to_json(), again.lineage.to_json());
    let (plain, _) = {
        let landscape = Landscape::load(&fixture_dir()).unwrap();
        let mut e = LandscapeEvaluator::new(landscape.clone());
        let out = search(
            &config(StrategyKind::Evolutionary, Budget::Evaluations(100), 5),
            landscape.space(),
            &mut e,
            Sinks::default(),
            &WallClock::start(),
        )
        .unwrap();
        (out, ())
    };
    assert_ne!(
        out.lineage.to_json(),
        plain.lineage.to_json(),
        "pipelining breeds from older results: another search"
    );
    // A generation limit holds for the batches bred ahead too.
    let (limited, rec) = pipelined_search(1000, 5, Some(3));
    assert_eq!(limited.stop, StopReason::Generations);
    assert_eq!(rec.evaluated.len(), 4, "generations 0 to 3");
}
