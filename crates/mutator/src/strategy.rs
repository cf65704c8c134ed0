//! Search strategies: how the next batch of candidates is chosen.
//!
//! * evolutionary: a population; tournament selection; elites carried over;
//!   children by uniform crossover (at `crossover_rate`) and/or mutation, repaired;
//! * random: valid genomes drawn uniformly, never one twice;
//! * exhaustive: every valid point of a declared sub-space, in lexicographic order;
//! * guided: the evolutionary breeding with a cost model choosing which candidates
//!   are measured ([`crate::guided`]).
//!
//! A strategy sees only the RNG, the space, the set of genomes already evaluated and
//! the evaluations of its own batches, so the same seed and the same measurements
//! give the same sequence of candidates.

use crate::guided::Guided;
use crate::model::CostModel;
use crate::operators::{self, Candidate};
use crate::space::{SearchSpace, SpaceError};
use evo_genome::{GenomeFile, GenomeId};
use evo_lineage::Operator;
use evo_record::Evaluation;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;

/// Which strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    Evolutionary,
    Random,
    Exhaustive,
    Guided,
}

impl StrategyKind {
    pub const ALL: [StrategyKind; 4] = [
        StrategyKind::Evolutionary,
        StrategyKind::Random,
        StrategyKind::Exhaustive,
        StrategyKind::Guided,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Evolutionary => "evolutionary",
            StrategyKind::Random => "random",
            StrategyKind::Exhaustive => "exhaustive",
            StrategyKind::Guided => "guided",
        }
    }

    pub fn parse(s: &str) -> Option<StrategyKind> {
        StrategyKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parameters of the evolutionary strategy (the population size is also the batch
/// size of random and exhaustive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvolutionParams {
    /// Candidates per generation.
    pub population: usize,
    /// Best members carried unchanged into the next generation.
    pub elites: usize,
    /// Members drawn per tournament; the fastest wins.
    pub tournament: usize,
    /// Probability that a child is a crossover of two tournament winners.
    pub crossover_rate: f64,
    /// Probability that a crossover child is also mutated (a child not made by
    /// crossover is always mutated, or it would be a copy).
    pub mutation_rate: f64,
    /// Stop after this many generations (the seeds' generation is 0); none = budget only.
    pub generations: Option<u32>,
    /// Pipelined generations: from generation 2 on, each generation is bred from the
    /// population as it stood one generation earlier, before the generation ahead of it
    /// is measured, so its kernels compile while the GPUs measure that one (no GPU waits
    /// at a generation's start). Deterministic like the plain loop, but a different
    /// search: selection sees results one generation late.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pipeline: bool,
    /// Steady-state search: no generation barrier. Every answer breeds one new candidate
    /// from the population as it stands (the same tournament, crossover, mutation and
    /// repair), and the newcomer takes the place of the worst member, so `in_flight`
    /// candidates are always on their way (compiling, queued, running) and no GPU waits
    /// for a generation to end. Deterministic: the same seed and the same order of
    /// answers give the same lineage.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub steady: bool,
    /// How many candidates a steady-state search keeps submitted and unanswered; none:
    /// as many as the evaluator asks for (on the GPU: enough to keep two compiled
    /// candidates queued per GPU), fixed in the experiment when it starts, since the
    /// lineage depends on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<usize>,
}

impl Default for EvolutionParams {
    fn default() -> Self {
        EvolutionParams {
            population: 16,
            elites: 2,
            tournament: 3,
            crossover_rate: 0.5,
            mutation_rate: 0.5,
            generations: None,
            pipeline: false,
            steady: false,
            in_flight: None,
        }
    }
}

impl EvolutionParams {
    /// Checks the parameters; the message names the field.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.population < 2 {
            return Err((
                "population",
                format!("population = {} must be at least 2", self.population),
            ));
        }
        if self.elites >= self.population {
            return Err((
                "elites",
                format!(
                    "elites = {} must be below population = {}",
                    self.elites, self.population
                ),
            ));
        }
        if self.tournament == 0 {
            return Err(("tournament", "tournament must be at least 1".into()));
        }
        if self.steady && self.pipeline {
            return Err((
                "steady",
                "steady = true and pipeline = true are two answers to the same wait; choose one"
                    .into(),
            ));
        }
        if self.in_flight == Some(0) {
            return Err(("in_flight", "in_flight must be at least 1".into()));
        }
        for (name, v) in [
            ("crossover_rate", self.crossover_rate),
            ("mutation_rate", self.mutation_rate),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err((name, format!("{name} = {v} must lie in [0, 1]")));
            }
        }
        Ok(())
    }
}

/// How many tries to find an unseen child before drawing a random immigrant instead.
const TRIES_PER_CHILD: usize = 32;

/// A strategy's state between batches.
pub(crate) enum Strategy {
    Evolutionary(Evolution),
    Guided(Box<Guided>),
    Random { batch: usize },
    Exhaustive { batch: usize, next: usize },
}

pub(crate) struct Evolution {
    params: EvolutionParams,
    seeds: Vec<GenomeFile>,
    /// Current population with scores (failures score +∞), in a stable order.
    population: Vec<(Candidate, f64)>,
    pub(crate) generation: u32,
}

impl Strategy {
    /// The evolutionary strategy alone, for the steady-state loop.
    pub(crate) fn evolution(params: &EvolutionParams, seeds: Vec<GenomeFile>) -> Evolution {
        Evolution {
            params: params.clone(),
            seeds,
            population: Vec::new(),
            generation: 0,
        }
    }

    pub(crate) fn new(
        kind: StrategyKind,
        params: &EvolutionParams,
        seeds: Vec<GenomeFile>,
        space: &SearchSpace,
        model: Option<Box<dyn CostModel>>,
    ) -> Result<Strategy, SpaceError> {
        Ok(match kind {
            StrategyKind::Evolutionary => {
                Strategy::Evolutionary(Strategy::evolution(params, seeds))
            }
            StrategyKind::Guided => {
                let model = model.ok_or(SpaceError::NoModel)?;
                Strategy::Guided(Box::new(Guided::new(
                    Strategy::evolution(params, seeds),
                    model,
                )))
            }
            StrategyKind::Random => Strategy::Random {
                batch: params.population,
            },
            StrategyKind::Exhaustive => {
                if space.valid_points().is_none() {
                    return Err(SpaceError::NotEnumerable(space.size()));
                }
                Strategy::Exhaustive {
                    batch: params.population,
                    next: 0,
                }
            }
        })
    }

    /// The generation the next batch belongs to.
    pub(crate) fn generation(&self, batches_done: u32) -> u32 {
        match self {
            Strategy::Evolutionary(e) => e.generation,
            Strategy::Guided(g) => g.evolution.generation,
            _ => batches_done,
        }
    }

    /// The last generation the search may run, if limited.
    pub(crate) fn generation_limit(&self) -> Option<u32> {
        match self {
            Strategy::Evolutionary(e) => e.params.generations,
            Strategy::Guided(g) => g.evolution.params.generations,
            _ => None,
        }
    }

    /// True when the generation limit is reached.
    pub(crate) fn finished(&self) -> bool {
        match self {
            Strategy::Evolutionary(e) => e.finished(),
            Strategy::Guided(g) => g.evolution.finished(),
            _ => false,
        }
    }

    /// Up to `max` new candidates, none in `seen`. Empty means the space is exhausted.
    pub(crate) fn propose(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
        max: usize,
    ) -> Result<Vec<Candidate>, SpaceError> {
        match self {
            Strategy::Evolutionary(e) => e.propose(rng, space, seen, max),
            Strategy::Guided(g) => g.propose(rng, space, seen, max),
            Strategy::Random { batch } => {
                let n = (*batch).min(max);
                random_unseen(rng, space, seen, n)
            }
            Strategy::Exhaustive { batch, next } => {
                let points = space.valid_points().expect("checked in Strategy::new");
                let mut out = Vec::new();
                while out.len() < (*batch).min(max) && *next < points.len() {
                    let g = points[*next];
                    if !seen.contains(&g.id()) {
                        out.push(Candidate {
                            genome: g,
                            operators: vec![Operator::Enumerate {
                                index: *next as u64,
                            }],
                            parents: Vec::new(),
                            name: None,
                        });
                    }
                    *next += 1;
                }
                Ok(out)
            }
        }
    }

    /// The ids of the best `n` members of the evolutionary population that passed
    /// (best first); empty for the other strategies.
    pub(crate) fn elites(&self, n: usize) -> Vec<GenomeId> {
        let e = match self {
            Strategy::Evolutionary(e) => e,
            Strategy::Guided(g) => &g.evolution,
            _ => return Vec::new(),
        };
        let mut ranked: Vec<&(Candidate, f64)> =
            e.population.iter().filter(|(_, s)| s.is_finite()).collect();
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        ranked.iter().take(n).map(|(c, _)| c.genome.id()).collect()
    }

    /// Immigrants take the places of the worst members of the evolutionary population.
    pub(crate) fn immigrate(&mut self, immigrants: Vec<(Candidate, f64)>) {
        let e = match self {
            Strategy::Evolutionary(e) => Some(e),
            Strategy::Guided(g) => Some(&mut g.evolution),
            _ => None,
        };
        if let Some(e) = e {
            e.population.sort_by(|a, b| a.1.total_cmp(&b.1));
            let keep = e.population.len().saturating_sub(immigrants.len());
            e.population.truncate(keep);
            e.population.extend(immigrants);
        }
    }

    /// Feeds back the evaluations of the last batch (same order as proposed).
    pub(crate) fn observe(&mut self, results: &[(Candidate, Evaluation)]) {
        match self {
            Strategy::Evolutionary(e) => e.observe(results),
            Strategy::Guided(g) => g.observe(results),
            _ => {}
        }
    }

    /// How well the cost model predicted this search's measurements (guided only).
    pub(crate) fn model_quality(&self) -> Option<String> {
        match self {
            Strategy::Guided(g) => Some(g.model.quality()),
            _ => None,
        }
    }
}

/// Score for selection: lower is better, failures last.
fn score(e: &Evaluation) -> f64 {
    e.score_us.filter(|_| e.is_ok()).unwrap_or(f64::INFINITY)
}

/// `n` valid genomes not in `seen` and distinct, drawn uniformly.
pub(crate) fn random_unseen(
    rng: &mut ChaCha8Rng,
    space: &SearchSpace,
    seen: &HashSet<GenomeId>,
    n: usize,
) -> Result<Vec<Candidate>, SpaceError> {
    let mut taken: HashSet<GenomeId> = HashSet::new();
    let mut out = Vec::new();
    if let Some(points) = space.valid_points() {
        // Small space: draw from what is left, so the last points are found too.
        let mut left: Vec<_> = points
            .iter()
            .filter(|g| !seen.contains(&g.id()))
            .copied()
            .collect();
        while out.len() < n && !left.is_empty() {
            let g = left.remove(rng.random_range(0..left.len()));
            out.push(Candidate {
                genome: g,
                operators: vec![Operator::Random],
                parents: Vec::new(),
                name: None,
            });
        }
        return Ok(out);
    }
    let mut misses = 0;
    while out.len() < n && misses < 10_000 {
        let c = operators::random(space, rng)?;
        let id = c.genome.id();
        if seen.contains(&id) || !taken.insert(id) {
            misses += 1;
            continue;
        }
        out.push(c);
    }
    Ok(out)
}

impl Evolution {
    pub(crate) fn propose(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
        max: usize,
    ) -> Result<Vec<Candidate>, SpaceError> {
        if self.population.is_empty() {
            return self.initial(rng, space, seen, max);
        }
        let want = self.batch_size(max);
        let mut taken: HashSet<GenomeId> = HashSet::new();
        let mut out = Vec::new();
        'slots: while out.len() < want {
            for _ in 0..TRIES_PER_CHILD {
                let child = self.child(rng, space)?;
                let id = child.genome.id();
                if !seen.contains(&id) && !taken.contains(&id) {
                    taken.insert(id);
                    out.push(child);
                    continue 'slots;
                }
            }
            // The neighbourhood is used up: bring in a random immigrant instead.
            let mut seen_all = seen.clone();
            seen_all.extend(taken.iter().cloned());
            match random_unseen(rng, space, &seen_all, 1)?.pop() {
                Some(c) => {
                    taken.insert(c.genome.id());
                    out.push(c);
                }
                None => break,
            }
        }
        Ok(out)
    }

    /// Generation 0: the named seeds (repaired into the space), then random valid genomes.
    pub(crate) fn initial(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
        max: usize,
    ) -> Result<Vec<Candidate>, SpaceError> {
        let want = self.batch_size(max);
        let mut out = operators::dedup(self.seeded(rng, space)?, seen);
        out.truncate(want);
        let mut seen_all = seen.clone();
        seen_all.extend(out.iter().map(|c| c.genome.id()));
        out.extend(random_unseen(rng, space, &seen_all, want - out.len())?);
        Ok(out)
    }

    /// The named seeds, each repaired into the space.
    pub(crate) fn seeded(
        &self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
    ) -> Result<Vec<Candidate>, SpaceError> {
        self.seeds
            .iter()
            .map(|file| operators::seed(file, space, rng))
            .collect()
    }

    /// The next batch's size, at most `max`: the first population, then the places
    /// the elites leave.
    pub(crate) fn batch_size(&self, max: usize) -> usize {
        if self.population.is_empty() {
            self.params.population.min(max)
        } else {
            (self.params.population - self.params.elites).min(max)
        }
    }

    /// True when the generation limit is reached.
    pub(crate) fn finished(&self) -> bool {
        self.params
            .generations
            .is_some_and(|limit| self.generation > limit)
    }

    /// Nothing measured yet: the next batch is the first population.
    pub(crate) fn is_empty(&self) -> bool {
        self.population.is_empty()
    }

    /// Tournament: `tournament` members drawn with replacement; the best score wins
    /// (ties to the one drawn first).
    fn select<'a>(&'a self, rng: &mut ChaCha8Rng) -> &'a Candidate {
        let mut best: Option<&(Candidate, f64)> = None;
        for _ in 0..self.params.tournament {
            let m = &self.population[rng.random_range(0..self.population.len())];
            if best.is_none_or(|b| m.1 < b.1) {
                best = Some(m);
            }
        }
        &best.expect("tournament >= 1").0
    }

    pub(crate) fn child(
        &self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
    ) -> Result<Candidate, SpaceError> {
        let a = self.select(rng).genome;
        if rng.random_bool(self.params.crossover_rate) {
            let b = self.select(rng).genome;
            let (mut g, mut ops) = operators::crossover(&a, &b, space, rng)?;
            if rng.random_bool(self.params.mutation_rate) {
                let (m, more) = operators::mutate(&g, space, rng)?;
                g = m;
                ops.extend(more);
            }
            return Ok(Candidate {
                genome: g,
                operators: ops,
                // Two tournaments may pick the same member: then it is one parent.
                parents: if a == b {
                    vec![a.id()]
                } else {
                    vec![a.id(), b.id()]
                },
                name: None,
            });
        }
        let (g, ops) = operators::mutate(&a, space, rng)?;
        Ok(Candidate {
            genome: g,
            operators: ops,
            parents: vec![a.id()],
            name: None,
        })
    }

    pub(crate) fn observe(&mut self, results: &[(Candidate, Evaluation)]) {
        let offspring: Vec<(Candidate, f64)> =
            results.iter().map(|(c, e)| (c.clone(), score(e))).collect();
        if self.population.is_empty() {
            self.population = offspring;
        } else {
            // Generational replacement with elitism: the best `elites` of the old
            // population survive; the children take the other places; if there were
            // too few children, the next-best old members fill in.
            let mut old = std::mem::take(&mut self.population);
            old.sort_by(|a, b| a.1.total_cmp(&b.1));
            let keep = self.params.elites
                + (self.params.population - self.params.elites).saturating_sub(offspring.len());
            old.truncate(keep);
            self.population = old;
            self.population.extend(offspring);
        }
        self.generation += 1;
    }

    /// Steady-state replacement, one answer at a time: the newcomer joins, and once the
    /// population is over its size the worst member leaves (of equals the newest, so a
    /// newcomer that failed leaves at once). The population is the best of everything
    /// measured, so the elites are never lost; on the recorded landscape this reaches
    /// the optimum in fewer evaluations than turning the other places over oldest
    /// first, as a generation does.
    pub(crate) fn replace_worst(&mut self, newcomer: Candidate, evaluation: &Evaluation) {
        self.population.push((newcomer, score(evaluation)));
        if self.population.len() > self.params.population {
            // `max_by` returns the last of equal maxima: the newest of the worst.
            let worst = (0..self.population.len())
                .max_by(|&a, &b| self.population[a].1.total_cmp(&self.population[b].1))
                .expect("the population is not empty");
            self.population.remove(worst);
        }
    }
}
