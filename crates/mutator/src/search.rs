//! The search loop: propose a batch, take cache hits, evaluate the rest, record,
//! repeat until the budget is spent.
//!
//! The loop is the same on the GPU, on a replayed landscape and in tests; only the
//! [`Evaluator`] differs. After every batch the cache holds each new evaluation
//! (appended as it arrived) and `lineage.json` is rewritten atomically, so an
//! interrupted run leaves a consistent experiment that the next run resumes.

use crate::cache::{CacheError, EvaluationCache};
use crate::evaluator::{Evaluator, EvaluatorError};
use crate::island::{Exchange, IslandError, Migrant};
use crate::model::ModelHandle;
use crate::operators::Candidate;
use crate::space::{SearchSpace, SpaceError};
use crate::strategy::{EvolutionParams, Strategy, StrategyKind};
use evo_genome::{GenomeFile, GenomeId};
use evo_lineage::{Lineage, LineageError, LineageMeta, Node, Operator};
use evo_record::Evaluation;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};
use thiserror::Error;

/// When to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// At most this many evaluations (cache hits included: the search saw them).
    Evaluations(usize),
    /// No evaluation starts that the measured rate says would end after this much
    /// wall time; batches are cut to what still fits. The first evaluation runs alone,
    /// to measure the rate. Batch sizes depend on timing, so unlike an evaluation
    /// budget, a wall budget does not give a reproducible lineage.
    ///
    /// The time is a total across resumes: the lineage records the time spent
    /// ([`evo_lineage::Lineage::wall_s`]) each time it is saved, and a resumed search's
    /// clock ([`WallClock::resumed`]) starts there. Cache hits take no time: once the
    /// time is spent, the generational search still takes the recorded evaluations at
    /// the head of each batch (a resume replays its record) and stops at the first one
    /// that would need measuring.
    Wall(Duration),
}

/// Time as the budget sees it; tests use a fake one.
pub trait Clock {
    fn elapsed(&self) -> Duration;
}

/// The real clock, started when created, or at the time earlier runs spent.
pub struct WallClock {
    start: Instant,
    before: Duration,
}

impl WallClock {
    pub fn start() -> WallClock {
        WallClock::resumed(Duration::ZERO)
    }

    /// A clock that reads `before` when created: the wall time the earlier runs of a
    /// resumed search spent (its lineage's `wall_s`), which counts against its budget.
    pub fn resumed(before: Duration) -> WallClock {
        WallClock {
            start: Instant::now(),
            before,
        }
    }
}

impl Clock for WallClock {
    fn elapsed(&self) -> Duration {
        self.before.saturating_add(self.start.elapsed())
    }
}

/// Under a wall budget, writes the time spent so far into `lineage` (a resume goes on
/// from there); under an evaluation budget the lineage carries none.
pub(crate) fn stamp_wall_time(lineage: &mut Lineage, budget: Budget, clock: &dyn Clock) {
    if let Budget::Wall(_) = budget {
        // Whole milliseconds: the file stays readable.
        lineage.wall_s = Some(clock.elapsed().as_millis() as f64 / 1000.0);
    }
}

/// What a search is asked to do.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    pub strategy: StrategyKind,
    pub params: EvolutionParams,
    pub budget: Budget,
    pub seed: u64,
    /// Named genomes that start the evolutionary population.
    pub seeds: Vec<GenomeFile>,
    /// Title, device and objective written into the lineage.
    pub meta: LineageMeta,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    pub quiet: bool,
    /// The cost model of the guided strategy (the others ignore it).
    pub model: Option<ModelHandle>,
}

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Budget,
    Generations,
    /// Every reachable genome has been evaluated.
    SpaceExhausted,
}

/// What a search produced.
#[derive(Debug)]
pub struct SearchOutcome {
    pub lineage: Lineage,
    /// Evaluations the search used (fresh + cache hits).
    pub evaluations: usize,
    pub cache_hits: usize,
    pub ok: usize,
    pub failed: usize,
    pub stop: StopReason,
    /// Best score (µs) after each evaluation, `INFINITY` before the first pass.
    pub best_after: Vec<f64>,
    /// How well the guided strategy's cost model predicted the measurements.
    pub model_quality: Option<String>,
}

impl Default for SearchOutcome {
    fn default() -> SearchOutcome {
        SearchOutcome {
            lineage: Lineage::default(),
            evaluations: 0,
            cache_hits: 0,
            ok: 0,
            failed: 0,
            stop: StopReason::Budget,
            best_after: Vec::new(),
            model_quality: None,
        }
    }
}

impl SearchOutcome {
    /// The best score so far, `INFINITY` before the first pass.
    fn best(&self) -> f64 {
        self.best_after.last().copied().unwrap_or(f64::INFINITY)
    }

    /// Counts one answer and adds it to `lineage`, made in `generation`.
    pub(crate) fn record(
        &mut self,
        lineage: &mut Lineage,
        candidate: &Candidate,
        evaluation: &Evaluation,
        generation: u32,
        island: Option<u32>,
    ) -> Result<(), LineageError> {
        self.evaluations += 1;
        let mut best = self.best();
        if evaluation.is_ok() {
            self.ok += 1;
            best = best.min(evaluation.score_us.unwrap_or(f64::INFINITY));
        } else {
            self.failed += 1;
        }
        self.best_after.push(best);
        lineage.add(
            Node {
                id: candidate.genome.id(),
                genome: candidate.genome,
                name: candidate.name.clone(),
                generation,
                operators: candidate.operators.clone(),
                evaluation: Some(evaluation.clone()),
                island,
            },
            &candidate.parents,
        )
    }

    /// The progress bar's position and message after an answer of `generation`.
    pub(crate) fn show(&self, progress: &ProgressBar, generation: u32) {
        let best = self.best();
        progress.set_position(self.evaluations as u64);
        progress.set_message(format!(
            "gen {generation} · {} evaluated ({} cached) · {} ok · {} failed · best {}",
            self.evaluations,
            self.cache_hits,
            self.ok,
            self.failed,
            if best.is_finite() {
                format!("{best:.2} µs")
            } else {
                "—".into()
            }
        ));
    }

    /// Best score after the first `n` evaluations (or all of them, if fewer).
    pub fn best_within(&self, n: usize) -> Option<f64> {
        let i = n.min(self.best_after.len()).checked_sub(1)?;
        Some(self.best_after[i]).filter(|v| v.is_finite())
    }
}

#[derive(Debug, Error)]
pub enum SearchError {
    #[error(transparent)]
    Space(#[from] SpaceError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Lineage(#[from] LineageError),
    #[error(transparent)]
    Island(#[from] IslandError),
    #[error("the evaluator failed ({describe}): {source}")]
    Evaluator {
        describe: String,
        #[source]
        source: EvaluatorError,
    },
    #[error("the evaluator returned {got} evaluations for a batch of {want}, or in another order; it must answer each genome in order")]
    Mismatch { want: usize, got: usize },
    #[error("the evaluator answered genome {0}, which was not waiting for an answer")]
    Unasked(GenomeId),
    #[error("islands trade migrants at the ends of generations, and a steady-state search has none; run islands with the generational search")]
    SteadyIslands,
}

/// Where a search keeps its record; all optional (the strategy comparison keeps none).
#[derive(Default)]
pub struct Sinks<'a> {
    pub cache: Option<&'a mut EvaluationCache>,
    pub lineage_path: Option<&'a Path>,
    /// The island model's exchange, for one island of an evolutionary search.
    pub exchange: Option<&'a mut Exchange>,
}

/// Runs a search to the end of its budget.
pub fn search(
    config: &SearchConfig,
    space: &SearchSpace,
    evaluator: &mut dyn Evaluator,
    mut sinks: Sinks<'_>,
    clock: &dyn Clock,
) -> Result<SearchOutcome, SearchError> {
    if config.params.steady {
        return crate::steady::search(config, space, evaluator, sinks, clock);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let model = config.model.as_ref().map(|m| m.0.start());
    let mut strategy = Strategy::new(
        config.strategy,
        &config.params,
        config.seeds.clone(),
        space,
        model,
    )?;
    let mut lineage = Lineage::new(config.meta.clone());
    let mut seen: HashSet<GenomeId> = HashSet::new();
    let mut outcome = SearchOutcome::default();
    let progress = progress_bar(config);
    let mut rate = Rate::default();
    let mut batches = 0u32;
    let island = sinks.exchange.as_ref().map(|x| x.config().island);
    let pipeline = config.params.pipeline;
    // A pipelined search's next batch and its generation, bred before the current one
    // was measured.
    let mut pending: Option<(u32, Vec<Candidate>)> = None;
    loop {
        let max = match config.budget {
            Budget::Evaluations(n) => n.saturating_sub(outcome.evaluations),
            // Time is checked between evaluations, in `evaluate_batch`, which takes
            // cache hits even when it is spent: a resume replays its record.
            Budget::Wall(_) => usize::MAX,
        };
        let spent = matches!(config.budget, Budget::Wall(limit) if clock.elapsed() >= limit);
        // A bred-ahead batch loses the genomes measured meanwhile (a migrant's).
        let ready = pending.take().map(|(g, mut batch)| {
            batch.retain(|c| !seen.contains(&c.genome.id()));
            batch.truncate(max);
            (g, batch)
        });
        let (generation, batch) = match ready.filter(|(_, b)| !b.is_empty()) {
            Some(ready) => ready,
            None => {
                if strategy.finished() {
                    outcome.stop = StopReason::Generations;
                    break;
                }
                if max == 0 {
                    outcome.stop = StopReason::Budget;
                    break;
                }
                let generation = if pipeline {
                    batches
                } else {
                    strategy.generation(batches)
                };
                let batch = strategy.propose(&mut rng, space, &seen, max)?;
                if batch.is_empty() {
                    outcome.stop = if spent {
                        StopReason::Budget
                    } else {
                        StopReason::SpaceExhausted
                    };
                    break;
                }
                (generation, batch)
            }
        };
        debug_assert!(batch.len() <= max);
        // Pipelined: breed the following generation now, from the results measured so
        // far (every generation before this one), and let the evaluator compile it while
        // it measures this one. Not before anything was measured: generation 1 is bred
        // from generation 0's results, as in the plain loop.
        if pipeline && batches > 0 {
            let ahead = max.saturating_sub(batch.len());
            let next_generation = generation + 1;
            if ahead > 0
                && strategy
                    .generation_limit()
                    .is_none_or(|g| next_generation <= g)
            {
                let mut ahead_seen = seen.clone();
                ahead_seen.extend(batch.iter().map(|c| c.genome.id()));
                let next = strategy.propose(&mut rng, space, &ahead_seen, ahead)?;
                let misses: Vec<evo_genome::Genome> = next
                    .iter()
                    .filter(|c| {
                        sinks
                            .cache
                            .as_deref()
                            .is_none_or(|k| k.get(&c.genome.id()).is_none())
                    })
                    .map(|c| c.genome)
                    .collect();
                // Under a wall budget the batch is cut into chunks by the measured rate,
                // so what is asked for would not be the batch announced.
                if !misses.is_empty() && matches!(config.budget, Budget::Evaluations(_)) {
                    evaluator.prefetch(&misses);
                }
                if !next.is_empty() {
                    pending = Some((next_generation, next));
                }
            }
        }
        let results = evaluate_batch(
            &batch,
            evaluator,
            sinks.cache.as_deref_mut(),
            config.budget,
            clock,
            &mut rate,
            &mut outcome.cache_hits,
        )?;
        if results.is_empty() {
            outcome.stop = StopReason::Budget;
            break;
        }
        for (candidate, evaluation) in &results {
            seen.insert(candidate.genome.id());
            outcome.record(&mut lineage, candidate, evaluation, generation, island)?;
        }
        strategy.observe(&results);
        batches += 1;
        if let Some(exchange) = sinks.exchange.as_deref_mut() {
            if exchange.due(generation) {
                migrate(exchange, generation, &mut strategy, &mut lineage, &mut seen)?;
            }
        }
        if let Some(path) = sinks.lineage_path {
            stamp_wall_time(&mut lineage, config.budget, clock);
            lineage.save(path)?;
        }
        outcome.show(&progress, generation);
    }
    progress.finish_and_clear();
    stamp_wall_time(&mut lineage, config.budget, clock);
    outcome.lineage = lineage;
    outcome.model_quality = strategy.model_quality();
    Ok(outcome)
}

/// One exchange of the island model after `generation`: publish this island's elites,
/// then take in the other islands' as immigrants of the next generation.
fn migrate(
    exchange: &mut Exchange,
    generation: u32,
    strategy: &mut Strategy,
    lineage: &mut Lineage,
    seen: &mut HashSet<GenomeId>,
) -> Result<(), SearchError> {
    let config = exchange.config().clone();
    let elites = strategy
        .elites(config.migrants)
        .iter()
        .filter_map(|id| lineage.get(id))
        .filter_map(|node| {
            Some(Migrant {
                // An immigrant passed on keeps the island that measured it.
                island: node.island.unwrap_or(config.island),
                generation,
                name: node.name.clone(),
                evaluation: node.evaluation.clone()?,
            })
        })
        .collect();
    exchange.publish(generation, elites)?;
    let mut immigrants = Vec::new();
    for migrant in exchange.intake(generation, seen)? {
        let genome = migrant.evaluation.genome;
        let operators = vec![Operator::Immigrant {
            island: migrant.island,
            generation: migrant.generation,
        }];
        seen.insert(genome.id());
        lineage.add(
            Node {
                id: genome.id(),
                genome,
                name: migrant.name.clone(),
                generation: generation + 1,
                operators: operators.clone(),
                evaluation: Some(migrant.evaluation.clone()),
                island: Some(migrant.island),
            },
            &[],
        )?;
        let score = migrant
            .evaluation
            .score_us
            .filter(|_| migrant.evaluation.is_ok())
            .unwrap_or(f64::INFINITY);
        immigrants.push((
            Candidate {
                genome,
                operators,
                parents: Vec::new(),
                name: migrant.name,
            },
            score,
        ));
    }
    strategy.immigrate(immigrants);
    Ok(())
}

/// Measured seconds per fresh evaluation, for sizing chunks under a wall budget.
#[derive(Default)]
pub(crate) struct Rate {
    pub(crate) time: Duration,
    pub(crate) count: usize,
}

impl Rate {
    /// Fresh evaluations that fit in `left` at the measured rate (0: not even one);
    /// 1 before any was timed, to measure the rate.
    pub(crate) fn fit(&self, left: Duration) -> usize {
        if self.count == 0 {
            return 1;
        }
        let per = self.time.as_secs_f64() / self.count as f64;
        (left.as_secs_f64() / per.max(1e-9)).floor() as usize
    }
}

/// Takes cache hits, evaluates the misses, appends each to the cache as soon as the
/// evaluator returns it. Under an evaluation budget the misses go in one call (the
/// GPU worker compiles them in parallel); under a wall budget they go in chunks sized
/// by the measured rate, and none starts when the rate says it would end past the
/// deadline: the cache hits before the next miss are still taken (they take no time),
/// and the candidates left over are dropped, unevaluated and unrecorded.
fn evaluate_batch(
    batch: &[Candidate],
    evaluator: &mut dyn Evaluator,
    mut cache: Option<&mut EvaluationCache>,
    budget: Budget,
    clock: &dyn Clock,
    rate: &mut Rate,
    hits: &mut usize,
) -> Result<Vec<(Candidate, Evaluation)>, SearchError> {
    let mut results = Vec::with_capacity(batch.len());
    let mut next = 0;
    while next < batch.len() {
        let chunk_misses = match budget {
            Budget::Evaluations(_) => usize::MAX,
            Budget::Wall(limit) => {
                let elapsed = clock.elapsed();
                if elapsed >= limit {
                    0
                } else {
                    rate.fit(limit - elapsed)
                }
            }
        };
        // The chunk: consecutive candidates holding at most `chunk_misses` misses.
        let mut chunk: Vec<(&Candidate, Option<Evaluation>)> = Vec::new();
        let mut misses = Vec::new();
        while next < batch.len() {
            let c = &batch[next];
            let hit = cache.as_ref().and_then(|k| k.get(&c.genome.id()).cloned());
            if hit.is_none() {
                if misses.len() == chunk_misses {
                    break;
                }
                misses.push(c.genome);
            }
            chunk.push((c, hit));
            next += 1;
        }
        // No time for a miss, and no hit before the next one.
        if chunk.is_empty() {
            break;
        }
        *hits += chunk.len() - misses.len();
        let mut fresh = Vec::new().into_iter();
        if !misses.is_empty() {
            let start = clock.elapsed();
            // Each fresh evaluation reaches the cache (flushed) the moment it exists.
            let mut cache_error = None;
            let evaluated = evaluator
                .evaluate_each(&misses, &mut |e: &Evaluation| {
                    if let Some(cache) = cache.as_deref_mut() {
                        if let Err(err) = cache.insert(e.clone()) {
                            cache_error.get_or_insert(err);
                        }
                    }
                })
                .map_err(|source| SearchError::Evaluator {
                    describe: evaluator.describe(),
                    source,
                })?;
            if let Some(err) = cache_error {
                return Err(err.into());
            }
            rate.time += clock.elapsed().saturating_sub(start);
            rate.count += misses.len();
            let in_order = evaluated.len() == misses.len()
                && evaluated
                    .iter()
                    .zip(&misses)
                    .all(|(e, g)| e.genome_id == g.id());
            if !in_order {
                return Err(SearchError::Mismatch {
                    want: misses.len(),
                    got: evaluated.len(),
                });
            }
            fresh = evaluated.into_iter();
        }
        for (candidate, hit) in chunk {
            let evaluation = match hit {
                Some(e) => e,
                None => fresh.next().expect("lengths checked above"),
            };
            results.push((candidate.clone(), evaluation));
        }
    }
    Ok(results)
}

pub(crate) fn progress_bar(config: &SearchConfig) -> ProgressBar {
    if config.quiet {
        return ProgressBar::hidden();
    }
    let len = match config.budget {
        Budget::Evaluations(n) => n as u64,
        Budget::Wall(_) => 0,
    };
    // `stderr()` draws nothing when stderr is not a terminal (CI logs, pipes).
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template = match config.budget {
        Budget::Evaluations(_) => "{bar:30} {pos}/{len} evaluations, ETA {eta} · {msg}",
        Budget::Wall(_) => "{spinner} {elapsed} · {msg}",
    };
    bar.set_style(ProgressStyle::with_template(template).expect("the template is valid"));
    bar
}
