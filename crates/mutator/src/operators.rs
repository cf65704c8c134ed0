//! The genetic operators: mutation, uniform crossover, repair, seeding, dedup.
//!
//! Every operator returns a genome the space admits (allowed alleles, valid for
//! the head dimension and device) together with the [`Operator`] steps that made
//! it, so the lineage can say exactly how each candidate came about. All
//! randomness comes from the caller's RNG: the same RNG state gives the same child.

use crate::space::{SearchSpace, SpaceError};
use evo_genome::{space::structural_for_pass, Gene, Genome, GenomeFile, GenomeId};
use evo_lineage::Operator;
use rand::seq::IndexedRandom;
use rand::Rng;
use std::collections::HashSet;

/// A genome proposed for evaluation, with how it was made and from whom.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub genome: Genome,
    /// Steps in the order applied.
    pub operators: Vec<Operator>,
    /// Primary parent first, then a crossover partner; empty for roots.
    pub parents: Vec<GenomeId>,
    /// The name of a seed genome.
    pub name: Option<String>,
}

fn change(gene: Gene, from: &Genome, to: &Genome) -> (Gene, String, String) {
    (gene, from.allele_label(gene), to.allele_label(gene))
}

/// Moves one or two genes of `parent` (ordered genes to a neighbouring allowed allele,
/// categorical ones to any other allowed allele), then repairs the result without
/// undoing the mutation where possible. Returns the parent unchanged, with no steps,
/// when the space has no gene to move.
pub fn mutate<R: Rng + ?Sized>(
    parent: &Genome,
    space: &SearchSpace,
    rng: &mut R,
) -> Result<(Genome, Vec<Operator>), SpaceError> {
    // Only genes that shape this family's kernel: moving another one changes nothing.
    let genes: Vec<Gene> = space
        .free_genes()
        .into_iter()
        .filter(|g| g.applies(parent.family))
        .collect();
    if genes.is_empty() {
        return Ok((*parent, Vec::new()));
    }
    // A move that only repair can make valid may be undone by it entirely (P into
    // registers with WMMA math, say): draw again, a bounded number of times.
    let mut last = (*parent, Vec::new());
    for _ in 0..MUTATION_ATTEMPTS {
        last = mutate_once(parent, space, genes.clone(), rng)?;
        if last.0 != *parent {
            break;
        }
    }
    Ok(last)
}

/// Draws left after which [`mutate`] returns an undone mutation as it is.
const MUTATION_ATTEMPTS: usize = 16;

fn mutate_once<R: Rng + ?Sized>(
    parent: &Genome,
    space: &SearchSpace,
    mut genes: Vec<Gene>,
    rng: &mut R,
) -> Result<(Genome, Vec<Operator>), SpaceError> {
    let count = if genes.len() > 1 && rng.random_bool(0.5) {
        2
    } else {
        1
    };
    let mut child = *parent;
    let mut ops = Vec::new();
    let mut moved = Vec::new();
    for _ in 0..count {
        let gene = genes.swap_remove(rng.random_range(0..genes.len()));
        let allowed = space.allowed(gene);
        let current = child.allele_index(gene);
        let next = match allowed.iter().position(|&a| a == current) {
            Some(pos) if gene.is_ordered() => {
                let mut neighbours = Vec::with_capacity(2);
                if pos > 0 {
                    neighbours.push(allowed[pos - 1]);
                }
                if pos + 1 < allowed.len() {
                    neighbours.push(allowed[pos + 1]);
                }
                *neighbours
                    .choose(rng)
                    .expect("a free gene has two allowed alleles")
            }
            _ => {
                let others: Vec<usize> =
                    allowed.iter().copied().filter(|&a| a != current).collect();
                *others
                    .choose(rng)
                    .expect("a free gene has two allowed alleles")
            }
        };
        let before = child;
        child = child.with_allele(gene, next);
        let (gene, from, to) = change(gene, &before, &child);
        ops.push(Operator::Mutate { gene, from, to });
        moved.push(gene);
    }
    let (repaired, repairs) = repair_keeping(&child, space, rng, &moved)?;
    ops.extend(repairs);
    Ok((repaired, ops))
}

/// Uniform crossover: each gene from `a` or `b` with equal odds, then repair.
pub fn crossover<R: Rng + ?Sized>(
    a: &Genome,
    b: &Genome,
    space: &SearchSpace,
    rng: &mut R,
) -> Result<(Genome, Vec<Operator>), SpaceError> {
    let mut child = *a;
    for gene in space.genes() {
        if rng.random_bool(0.5) {
            child = child.with_allele(gene, b.allele_index(gene));
        }
    }
    let mut ops = vec![Operator::Crossover { other: b.id() }];
    let (repaired, repairs) = repair(&child, space, rng)?;
    ops.extend(repairs);
    Ok((repaired, ops))
}

/// The nearest genome the space admits: fewest gene changes, ties broken by the RNG.
/// A genome the space already admits comes back unchanged (and draws nothing from
/// the RNG), so repair is idempotent.
pub fn repair<R: Rng + ?Sized>(
    genome: &Genome,
    space: &SearchSpace,
    rng: &mut R,
) -> Result<(Genome, Vec<Operator>), SpaceError> {
    repair_keeping(genome, space, rng, &[])
}

/// Repair that first tries to leave `keep` genes alone (a mutation just set them;
/// undoing it would make the mutation pointless), and only then touches them.
fn repair_keeping<R: Rng + ?Sized>(
    genome: &Genome,
    space: &SearchSpace,
    rng: &mut R,
    keep: &[Gene],
) -> Result<(Genome, Vec<Operator>), SpaceError> {
    let projected = project(genome, space);
    let fixed = if space.is_valid(&projected) {
        projected
    } else {
        // The genes a rule of the space's pass reads (the forward's are STRUCTURAL's, in
        // its order, so a forward repair draws as it always did; the backward adds exp,
        // which a rule of hopper_bwd reads).
        let movable: Vec<Gene> = structural_for_pass(space.pass())
            .into_iter()
            .filter(|g| space.allowed(*g).len() > 1)
            .collect();
        let preferred: Vec<Gene> = movable
            .iter()
            .copied()
            .filter(|g| !keep.contains(g))
            .collect();
        match nearest_valid(&projected, space, &preferred, rng)
            .or_else(|| nearest_valid(&projected, space, &movable, rng))
        {
            Some(g) => g,
            // Only free genes differ: no structural change helps, so draw afresh.
            None => space.sample_valid(rng)?,
        }
    };
    // One genome per kernel: genes that do not apply to the family go to baseline
    // (where the space allows it), and are not reported as repairs.
    let canonical = fixed.canonical();
    let fixed = if space.contains(&canonical) {
        canonical
    } else {
        fixed
    };
    let ops = genome
        .diff(&fixed)
        .into_iter()
        .filter(|gene| gene.applies(fixed.family))
        .map(|gene| {
            let (gene, from, to) = change(gene, genome, &fixed);
            Operator::Repair { gene, from, to }
        })
        .collect();
    Ok((fixed, ops))
}

/// Moves every allele the space does not allow to the nearest allowed one
/// (ordered genes by index distance, ties to the lower; categorical genes to the first allowed).
fn project(genome: &Genome, space: &SearchSpace) -> Genome {
    let mut g = *genome;
    for gene in Gene::ALL {
        let allowed = space.allowed(gene);
        let current = g.allele_index(gene);
        if allowed.contains(&current) {
            continue;
        }
        let target = if gene.is_ordered() {
            *allowed
                .iter()
                .min_by_key(|&&a| (a.abs_diff(current), a))
                .expect("every gene allows an allele")
        } else {
            allowed[0]
        };
        g = g.with_allele(gene, target);
    }
    g
}

/// Breadth-first over the number of changed genes among `genes` (the structural
/// genes: only they take part in the validity rules, see `evo_genome::space`):
/// collects every valid genome at the smallest distance and picks one with the RNG.
fn nearest_valid<R: Rng + ?Sized>(
    genome: &Genome,
    space: &SearchSpace,
    genes: &[Gene],
    rng: &mut R,
) -> Option<Genome> {
    for distance in 1..=genes.len() {
        let mut found = Vec::new();
        for subset in combinations(genes.len(), distance) {
            let chosen: Vec<Gene> = subset.iter().map(|&i| genes[i]).collect();
            collect_changes(genome, space, &chosen, &mut found);
        }
        if !found.is_empty() {
            return Some(found[rng.random_range(0..found.len())]);
        }
    }
    None
}

/// Every way to change each of `genes` to another allowed allele; keeps the valid ones.
fn collect_changes(genome: &Genome, space: &SearchSpace, genes: &[Gene], out: &mut Vec<Genome>) {
    let Some((&first, rest)) = genes.split_first() else {
        if space.is_valid(genome) {
            out.push(*genome);
        }
        return;
    };
    let current = genome.allele_index(first);
    for &a in space.allowed(first) {
        if a != current {
            collect_changes(&genome.with_allele(first, a), space, rest, out);
        }
    }
}

/// All `k`-subsets of `0..n` in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current = Vec::with_capacity(k);
    fn walk(start: usize, n: usize, k: usize, current: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if current.len() == k {
            out.push(current.clone());
            return;
        }
        for i in start..n {
            current.push(i);
            walk(i + 1, n, k, current, out);
            current.pop();
        }
    }
    walk(0, n, k, &mut current, &mut out);
    out
}

/// A named genome as a root candidate, repaired into the space if it lies outside it
/// (a seed designed for another device or head dimension still starts somewhere near).
pub fn seed<R: Rng + ?Sized>(
    file: &GenomeFile,
    space: &SearchSpace,
    rng: &mut R,
) -> Result<Candidate, SpaceError> {
    let (genome, repairs) = repair(&file.genes, space, rng)?;
    let mut operators = vec![Operator::Seed {
        name: file.name.clone(),
    }];
    operators.extend(repairs);
    Ok(Candidate {
        genome,
        operators,
        parents: Vec::new(),
        name: Some(file.name.clone()),
    })
}

/// A root drawn uniformly from the valid points of the space.
pub fn random<R: Rng + ?Sized>(space: &SearchSpace, rng: &mut R) -> Result<Candidate, SpaceError> {
    Ok(Candidate {
        genome: space.sample_valid(rng)?,
        operators: vec![Operator::Random],
        parents: Vec::new(),
        name: None,
    })
}

/// Drops candidates whose canonical id is in `seen` or earlier in the list, keeping order.
pub fn dedup(candidates: Vec<Candidate>, seen: &HashSet<GenomeId>) -> Vec<Candidate> {
    let mut batch = HashSet::new();
    candidates
        .into_iter()
        .filter(|c| {
            let id = c.genome.id();
            !seen.contains(&id) && batch.insert(id)
        })
        .collect()
}
