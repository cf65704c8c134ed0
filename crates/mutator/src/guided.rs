//! The model-guided strategy: the evolutionary strategy's breeding, with a cost model
//! choosing which of the bred candidates are compiled and measured (MetaSchedule's
//! and Ansor's loop).
//!
//! Each batch starts from a pool far larger than the batch: children bred by the
//! population's tournament, crossover and mutation; every single-gene neighbour of the
//! best genomes measured so far (the near-ties of an optimum differ in one gene: a
//! producer's registers, a stage count); and genomes drawn uniformly from the space,
//! so a region no parent lies in can still be reached. The model ranks the pool and
//! the batch is its best-ranked candidates. After each batch the model learns from
//! the measurements, so a search that starts from what other shapes taught it
//! corrects itself on this shape.
//!
//! The first batch is the named seeds (measured as they are: a user's champion is
//! never skipped on a prediction) and the model's best picks of a uniform draw. The
//! steady-state search ranks a smaller pool for each answer ([`Guided::breed_one`]).
//! Deterministic: the same seed, the same model and the same measurements give the
//! same candidates.

use crate::model::CostModel;
use crate::operators::{self, Candidate};
use crate::space::{SearchSpace, SpaceError};
use crate::strategy::{random_unseen, Evolution};
use evo_genome::{Genome, GenomeId};
use evo_lineage::Operator;
use evo_record::Evaluation;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;

/// Children bred per place of the batch, for the model to choose from.
const BRED_PER_SLOT: usize = 16;
/// Genomes drawn uniformly into each pool (all the valid points when fewer).
const DRAWN: usize = 4096;
/// The same for the steady-state search, which ranks a pool for every answer: a
/// smaller draw keeps the ranking to milliseconds where GPUs answer many times a second.
const DRAWN_STEADY: usize = 256;
/// Whose single-gene neighbours join each pool: the best this many measured.
const NEIGHBOURS_OF: usize = 2;

pub(crate) struct Guided {
    pub(crate) evolution: Evolution,
    pub(crate) model: Box<dyn CostModel>,
    /// The best measured genomes that passed, fastest first (of equals the first
    /// measured), at most [`NEIGHBOURS_OF`]: the neighbourhoods' centres.
    best: Vec<(Genome, f64)>,
}

impl Guided {
    pub(crate) fn new(evolution: Evolution, model: Box<dyn CostModel>) -> Guided {
        Guided {
            evolution,
            model,
            best: Vec::new(),
        }
    }

    pub(crate) fn propose(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
        max: usize,
    ) -> Result<Vec<Candidate>, SpaceError> {
        let first = self.evolution.is_empty();
        let want = self.evolution.batch_size(max);
        self.ranked(rng, space, seen, want, first, DRAWN)
    }

    /// One child for the steady-state search: the best-ranked of a pool bred from the
    /// population as it stands. `None` when the space has nothing left.
    pub(crate) fn breed_one(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
    ) -> Result<Option<Candidate>, SpaceError> {
        Ok(self.ranked(rng, space, seen, 1, false, DRAWN_STEADY)?.pop())
    }

    /// The `want` best-ranked of a pool (the named seeds first when `first`).
    fn ranked(
        &mut self,
        rng: &mut ChaCha8Rng,
        space: &SearchSpace,
        seen: &HashSet<GenomeId>,
        want: usize,
        first: bool,
        drawn: usize,
    ) -> Result<Vec<Candidate>, SpaceError> {
        let mut out: Vec<Candidate> = Vec::new();
        let mut taken: HashSet<GenomeId> = HashSet::new();
        if first {
            for c in operators::dedup(self.evolution.seeded(rng, space)?, seen) {
                if out.len() < want && taken.insert(c.genome.id()) {
                    out.push(c);
                }
            }
        }
        let mut pool: Vec<Candidate> = Vec::new();
        let mut offer = |c: Candidate, pool: &mut Vec<Candidate>| {
            if !seen.contains(&c.genome.id()) && taken.insert(c.genome.id()) {
                pool.push(c);
            }
        };
        if !first {
            for _ in 0..want * BRED_PER_SLOT {
                offer(self.evolution.child(rng, space)?, &mut pool);
            }
            for (centre, _) in &self.best {
                for c in neighbours(centre, space) {
                    offer(c, &mut pool);
                }
            }
        }
        for c in random_unseen(rng, space, seen, drawn)? {
            offer(c, &mut pool);
        }
        let genomes: Vec<Genome> = pool.iter().map(|c| c.genome).collect();
        let predicted = self.model.predict(&genomes);
        let mut order: Vec<usize> = (0..pool.len()).collect();
        // Stable: of equal predictions the one offered first, so a run is reproducible.
        order.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]));
        for i in order {
            if out.len() >= want {
                break;
            }
            out.push(pool[i].clone());
        }
        Ok(out)
    }

    pub(crate) fn observe(&mut self, results: &[(Candidate, Evaluation)]) {
        self.evolution.observe(results);
        self.learn(results);
    }

    /// The steady-state search's answer: the newcomer takes the worst member's place,
    /// and the model learns from it.
    pub(crate) fn replace_worst(&mut self, newcomer: Candidate, evaluation: &Evaluation) {
        self.learn(&[(newcomer.clone(), evaluation.clone())]);
        self.evolution.replace_worst(newcomer, evaluation);
    }

    fn learn(&mut self, results: &[(Candidate, Evaluation)]) {
        let evaluations: Vec<Evaluation> = results.iter().map(|(_, e)| e.clone()).collect();
        self.model.observe(&evaluations);
        for (c, e) in results {
            if let Some(us) = e.score_us.filter(|_| e.is_ok()) {
                let at = self.best.partition_point(|(_, b)| *b <= us);
                self.best.insert(at, (c.genome, us));
                self.best.truncate(NEIGHBOURS_OF);
            }
        }
    }
}

/// Every genome of the space one gene away from `centre` (any other allowed allele of
/// a gene that shapes its family's kernel), valid as it stands: no repair, which
/// would move a second gene.
fn neighbours(centre: &Genome, space: &SearchSpace) -> Vec<Candidate> {
    let mut out = Vec::new();
    for gene in space.free_genes() {
        if !gene.applies(centre.family) {
            continue;
        }
        let here = centre.allele_index(gene);
        for &allele in space.allowed(gene) {
            if allele == here {
                continue;
            }
            let g = centre.with_allele(gene, allele);
            if space.admits(&g) {
                out.push(Candidate {
                    genome: g,
                    operators: vec![Operator::Mutate {
                        gene,
                        from: centre.allele_label(gene),
                        to: g.allele_label(gene),
                    }],
                    parents: vec![centre.id()],
                    name: None,
                });
            }
        }
    }
    out
}
