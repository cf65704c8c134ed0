//! Islands and the pipelined search on the CPU: migrants taken from the exchange and
//! replayed, and each generation announced one ahead.

use super::*;

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
    let e = super::cache::some_evaluations(6);
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
