//! The steady-state search: no generation barrier. With the guided strategy, each
//! answer's newcomer is the cost model's pick of a pool bred from the population.
//!
//! The generational loop breeds a generation only when the last one is measured, so
//! every GPU waits at each generation's start for the first new kernels to compile.
//! Here the search keeps `in_flight` candidates submitted to the evaluator (compiling,
//! queued, running) and breeds one new candidate each time an answer comes back, from
//! the population as it stands: the same tournament, crossover, mutation and repair as
//! the generational strategy, and a replacement that keeps the best candidates measured
//! so far ([`Evolution::replace_worst`]).
//!
//! The run starts like the generational one: the named seeds and random genomes make
//! the first population, and breeding starts once all of it has answered (a child of
//! the first answer alone would be a child of chance). Children are numbered into
//! generations of `population - elites`, as many as a generation of the generational
//! loop has, which is what a generation limit counts.
//!
//! Determinism: with the same seed, the same `in_flight` and the same order of answers,
//! the lineage is the same, byte for byte. The order is recorded where the answers
//! are: every fresh answer is appended to the evaluation cache as it arrives, so the
//! cache's order is the answer order, and a re-run takes the recorded answers in that
//! order (of the candidates waiting, always the one recorded first), which replays the
//! lineage; a resumed run replays its recorded part and goes on from there.
//!
//! Under a wall budget the moments candidates are submitted depend on timing, and
//! nothing is submitted once the time is spent: a resumed search whose time is spent
//! (the budget is a total across resumes) replays nothing.

use crate::cache::EvaluationCache;
use crate::evaluator::Evaluator;
use crate::guided::Guided;
use crate::operators::Candidate;
use crate::search::{
    progress_bar, stamp_wall_time, Budget, Clock, Rate, SearchConfig, SearchError, SearchOutcome,
    Sinks, StopReason,
};
use crate::space::{SearchSpace, SpaceError};
use crate::strategy::{Evolution, Strategy, StrategyKind};
use evo_genome::{Genome, GenomeId};
use evo_lineage::Lineage;
use evo_record::Evaluation;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{HashSet, VecDeque};

/// A candidate submitted and not yet answered.
struct Waiting {
    candidate: Candidate,
    generation: u32,
    /// Its recorded answer and that answer's place in the record, when the cache holds
    /// one.
    recorded: Option<(usize, Evaluation)>,
}

/// Runs a steady-state evolutionary search to the end of its budget.
pub(crate) fn search(
    config: &SearchConfig,
    space: &SearchSpace,
    evaluator: &mut dyn Evaluator,
    sinks: Sinks<'_>,
    clock: &dyn Clock,
) -> Result<SearchOutcome, SearchError> {
    if sinks.exchange.is_some() {
        return Err(SearchError::SteadyIslands);
    }
    let params = &config.params;
    let depth = params.in_flight.unwrap_or_else(|| evaluator.in_flight());
    let mut cache = sinks.cache;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let evolution: Evolution = Strategy::evolution(params, config.seeds.clone());
    let mut breeder = match config.strategy {
        StrategyKind::Guided => {
            let model = config.model.as_ref().ok_or(SpaceError::NoModel)?.0.start();
            Breeder::Guided(Box::new(Guided::new(evolution, model)))
        }
        _ => Breeder::Plain(evolution),
    };
    let mut lineage = Lineage::new(config.meta.clone());
    let mut outcome = SearchOutcome::default();
    let progress = progress_bar(config);
    let mut rate = Rate::default();
    // The rate is this run's: a resumed clock starts at the time earlier runs spent.
    let start = clock.elapsed();
    // Every genome bred so far: none is bred twice.
    let mut seen: HashSet<GenomeId> = HashSet::new();
    let limit = match config.budget {
        Budget::Evaluations(n) => n,
        Budget::Wall(_) => usize::MAX,
    };
    let mut initial: VecDeque<Candidate> = breeder
        .initial(&mut rng, space, &seen, params.population.min(limit))?
        .into();
    let first_population = initial.len();
    let turnover = params.population - params.elites;
    let mut waiting: Vec<Waiting> = Vec::new();
    let mut submitted = 0usize;
    let mut children = 0usize;
    loop {
        // Keep `depth` candidates on their way; `held` says why no more went.
        let mut held = StopReason::Budget;
        while waiting.len() < depth {
            let room = match config.budget {
                Budget::Evaluations(n) => submitted < n,
                Budget::Wall(limit) => {
                    let elapsed = clock.elapsed();
                    elapsed < limit && rate.fit(limit - elapsed) > waiting.len()
                }
            };
            if !room {
                break;
            }
            let (candidate, generation) = match initial.pop_front() {
                Some(c) => (c, 0),
                // Breeding waits for the whole first population.
                None if outcome.evaluations < first_population => break,
                None => {
                    let generation = (children / turnover) as u32 + 1;
                    if params.generations.is_some_and(|g| generation > g) {
                        held = StopReason::Generations;
                        break;
                    }
                    match breeder.child(&mut rng, space, &seen)? {
                        Some(c) => {
                            children += 1;
                            (c, generation)
                        }
                        None => {
                            held = StopReason::SpaceExhausted;
                            break;
                        }
                    }
                }
            };
            let id = candidate.genome.id();
            seen.insert(id.clone());
            let recorded = cache
                .as_deref()
                .and_then(|k| Some((k.place(&id)?, k.get(&id)?.clone())));
            if recorded.is_none() {
                evaluator
                    .submit(&candidate.genome)
                    .map_err(|source| SearchError::Evaluator {
                        describe: evaluator.describe(),
                        source,
                    })?;
            }
            waiting.push(Waiting {
                candidate,
                generation,
                recorded,
            });
            submitted += 1;
        }
        if waiting.is_empty() {
            outcome.stop = held;
            break;
        }
        let (answered, evaluation) =
            next_answer(&mut waiting, evaluator, cache.as_deref_mut(), &mut outcome)?;
        if answered.recorded.is_none() {
            rate.time = clock.elapsed().saturating_sub(start);
            rate.count += 1;
        }
        outcome.record(
            &mut lineage,
            &answered.candidate,
            &evaluation,
            answered.generation,
            None,
        )?;
        breeder.replace_worst(answered.candidate, &evaluation);
        if let Some(path) = sinks.lineage_path {
            if outcome.evaluations % turnover == 0 {
                stamp_wall_time(&mut lineage, config.budget, clock);
                lineage.save(path)?;
            }
        }
        outcome.show(&progress, answered.generation);
    }
    stamp_wall_time(&mut lineage, config.budget, clock);
    // A search that took nothing (its wall time spent before it started) does not
    // replace the record with an empty lineage.
    if let Some(path) = sinks.lineage_path.filter(|_| !lineage.is_empty()) {
        lineage.save(path)?;
    }
    progress.finish_and_clear();
    outcome.lineage = lineage;
    outcome.model_quality = breeder.quality();
    Ok(outcome)
}

/// What breeds the candidates: the population alone, or the population with a cost
/// model choosing among its children (the guided strategy).
enum Breeder {
    Plain(Evolution),
    Guided(Box<Guided>),
}

impl Breeder {
    /// The first population: the named seeds, then random genomes (or the model's picks).
    fn initial(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
        n: usize,
    ) -> Result<Vec<Candidate>, SpaceError> {
        match self {
            Breeder::Plain(e) => e.initial(rng, space, seen, n),
            Breeder::Guided(g) => g.propose(rng, space, seen, n),
        }
    }

    /// One new candidate from the population as it stands.
    fn child(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
    ) -> Result<Option<Candidate>, SpaceError> {
        match self {
            Breeder::Plain(e) => Ok(e.propose(rng, space, seen, 1)?.pop()),
            Breeder::Guided(g) => g.breed_one(rng, space, seen),
        }
    }

    fn replace_worst(&mut self, newcomer: Candidate, evaluation: &Evaluation) {
        match self {
            Breeder::Plain(e) => e.replace_worst(newcomer, evaluation),
            Breeder::Guided(g) => g.replace_worst(newcomer, evaluation),
        }
    }

    fn quality(&self) -> Option<String> {
        match self {
            Breeder::Plain(_) => None,
            Breeder::Guided(g) => Some(g.model.quality()),
        }
    }
}

/// The next answer: of the candidates waiting, the one recorded first when the cache
/// holds any (a re-run replays the recorded order), else the evaluator's next, which is
/// appended to the cache the moment it exists.
fn next_answer(
    waiting: &mut Vec<Waiting>,
    evaluator: &mut dyn Evaluator,
    cache: Option<&mut EvaluationCache>,
    outcome: &mut SearchOutcome,
) -> Result<(Waiting, Evaluation), SearchError> {
    let recorded = waiting
        .iter()
        .enumerate()
        .filter_map(|(i, w)| Some((w.recorded.as_ref()?.0, i)))
        .min()
        .map(|(_, i)| i);
    if let Some(i) = recorded {
        let answered = waiting.remove(i);
        let evaluation = answered.recorded.clone().expect("chosen for it").1;
        outcome.cache_hits += 1;
        return Ok((answered, evaluation));
    }
    let asked: Vec<Genome> = waiting.iter().map(|w| w.candidate.genome).collect();
    let evaluation = evaluator
        .next_answer(&asked)
        .map_err(|source| SearchError::Evaluator {
            describe: evaluator.describe(),
            source,
        })?;
    let i = waiting
        .iter()
        .position(|w| w.candidate.genome.id() == evaluation.genome_id)
        .ok_or_else(|| SearchError::Unasked(evaluation.genome_id.clone()))?;
    if let Some(cache) = cache {
        cache.insert(evaluation.clone())?;
    }
    Ok((waiting.remove(i), evaluation))
}
