//! The guided strategy with stand-in models: an oracle (the synthetic landscape's own
//! answers) must lead it to the optimum sooner than the evolutionary search; a model
//! that knows nothing must still give valid, new, distinct candidates; and the same
//! seed, model and answers give the same lineage.

use super::*;
use crate::model::{CostModel, CostModelSource, ModelHandle};

/// Predicts from the fixture's formula: a perfect model.
struct Oracle;
/// Predicts the same for every genome: no knowledge at all.
struct Blind;

struct Model {
    oracle: bool,
    observed: usize,
}

impl CostModel for Model {
    fn predict(&mut self, genomes: &[Genome]) -> Vec<f64> {
        genomes
            .iter()
            .map(|g| match self.oracle {
                true => fixture::synthetic_evaluation(g, HeadDim::D64, Target::Sm90)
                    .score_us
                    .unwrap_or(f64::INFINITY),
                false => 1.0,
            })
            .collect()
    }
    fn observe(&mut self, measured: &[Evaluation]) {
        self.observed += measured.len();
    }
    fn quality(&self) -> String {
        format!("observed {}", self.observed)
    }
}

impl CostModelSource for Oracle {
    fn start(&self) -> Box<dyn CostModel> {
        Box::new(Model {
            oracle: true,
            observed: 0,
        })
    }
    fn describe(&self) -> String {
        "oracle".into()
    }
}

impl CostModelSource for Blind {
    fn start(&self) -> Box<dyn CostModel> {
        Box::new(Model {
            oracle: false,
            observed: 0,
        })
    }
    fn describe(&self) -> String {
        "blind".into()
    }
}

fn replay(config: &SearchConfig) -> SearchOutcome {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let mut evaluator = LandscapeEvaluator::new(landscape.clone());
    search(
        config,
        landscape.space(),
        &mut evaluator,
        Sinks::default(),
        &WallClock::start(),
    )
    .unwrap()
}

fn guided(model: ModelHandle, seed: u64) -> SearchConfig {
    let mut c = config(StrategyKind::Guided, Budget::Evaluations(64), seed);
    c.seeds = Vec::new();
    c.model = Some(model);
    c
}

#[test]
fn an_oracle_leads_the_guided_search_to_the_optimum_at_once() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let (_, optimum) = landscape.optimum().unwrap();
    for seed in 0..4 {
        let outcome = replay(&guided(ModelHandle::new(Oracle), seed));
        // The first batch is the model's best picks of a uniform draw of the space.
        assert_eq!(outcome.best_within(16), Some(optimum), "seed {seed}");
        assert_eq!(outcome.model_quality.as_deref(), Some("observed 64"));
    }
}

#[test]
fn a_blind_model_still_gives_valid_new_distinct_candidates() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let outcome = replay(&guided(ModelHandle::new(Blind), 3));
    assert_eq!(outcome.evaluations, 64);
    let ids: HashSet<GenomeId> = outcome.lineage.nodes().map(|n| n.id.clone()).collect();
    assert_eq!(ids.len(), 64, "no genome measured twice");
    for node in outcome.lineage.nodes() {
        assert!(landscape.space().admits(&node.genome), "{}", node.id);
    }
}

#[test]
fn the_guided_search_is_reproducible_and_needs_its_model() {
    let a = replay(&guided(ModelHandle::new(Blind), 9));
    let b = replay(&guided(ModelHandle::new(Blind), 9));
    assert_eq!(a.lineage.to_json(), b.lineage.to_json());
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let mut evaluator = LandscapeEvaluator::new(landscape.clone());
    let mut none = guided(ModelHandle::new(Blind), 9);
    none.model = None;
    let err = search(
        &none,
        landscape.space(),
        &mut evaluator,
        Sinks::default(),
        &WallClock::start(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cost model"), "{err}");
}

#[test]
fn the_steady_state_search_takes_the_model_too() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    let (_, optimum) = landscape.optimum().unwrap();
    let steady = |model: ModelHandle| {
        let mut c = guided(model, 5);
        c.params.steady = true;
        c.params.in_flight = Some(4);
        replay(&c)
    };
    let oracle = steady(ModelHandle::new(Oracle));
    assert_eq!(oracle.best_within(16), Some(optimum));
    assert_eq!(oracle.model_quality.as_deref(), Some("observed 64"));
    // Reproducible, and every candidate new and inside the space.
    let (a, b) = (
        steady(ModelHandle::new(Blind)),
        steady(ModelHandle::new(Blind)),
    );
    assert_eq!(a.lineage.to_json(), b.lineage.to_json());
    let ids: HashSet<GenomeId> = a.lineage.nodes().map(|n| n.id.clone()).collect();
    assert_eq!(ids.len(), 64);
    assert!(a
        .lineage
        .nodes()
        .all(|n| landscape.space().admits(&n.genome)));
}
