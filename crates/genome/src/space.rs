//! The valid space: every genome that passes the rules, counted, enumerated and sampled.
//!
//! A genome is counted once per kernel: in its canonical form, with the genes that do
//! not apply to its family at their baseline ([`Genome::canonical`]). Only the
//! *structural* genes (family, math, residence, tiles, warps, consumer warpgroups,
//! stages, layout, the persistent grid, chained overlap, the split, the cluster merge,
//! O's store path, what the consumer warpgroups split, and the backward's dQ mode and
//! dK/dV split) take part in the rules; the others (producer warps, load kinds, vector
//! width, exp, register cap, min blocks, packed grouped heads) never change validity.
//! Counting therefore walks the structural product of each family and multiplies by
//! that family's free product; a test checks the independence claim on random genomes.
//! One gene is structural in one family only: `exp` in
//! `hopper_bwd`, whose template has no polynomial exponential ([`structural_in`]).
//!
//! Every space is of one [`Pass`]: the forward families or the backward ones, never
//! both (no job takes a kernel of either). The functions without a pass are the
//! forward's, as they were before the backward family: their counts and their draws
//! from a seeded RNG are unchanged.

use crate::genes::{Family, Gene, Genome};
use crate::pass::Pass;
use crate::problem::HeadDim;
use crate::target::Target;
use rand::Rng;

/// Genes that appear in at least one validity rule.
pub const STRUCTURAL: [Gene; 21] = [
    Gene::Family,
    Gene::WgSplit,
    Gene::OStore,
    Gene::SplitKv,
    Gene::ClusterCombine,
    Gene::Persistent,
    Gene::SoftmaxOverlap,
    Gene::ConsumerWgs,
    Gene::Pingpong,
    Gene::ProducerRegs,
    Gene::QkMath,
    Gene::PvMath,
    Gene::PPath,
    Gene::OAccum,
    Gene::BlockM,
    Gene::BlockN,
    Gene::Warps,
    Gene::Stages,
    Gene::SmemLayout,
    Gene::DqMode,
    Gene::DkvSplit,
];

/// Genes no rule reads (of the forward, and of every family but `hopper_bwd`, whose
/// template has no polynomial exponential: see [`structural_in`]).
pub fn free_genes() -> Vec<Gene> {
    Gene::ALL
        .into_iter()
        .filter(|g| !STRUCTURAL.contains(g))
        .collect()
}

/// The genes a rule reads for one family's kernels, in [`STRUCTURAL`]'s order, the
/// family gene left out: `exp` is one of them for `hopper_bwd` alone (rule
/// `hopper_bwd_exp`), so it stays free, and the forward's counts, walks and draws stay
/// as they were.
pub fn structural_in(family: Family) -> Vec<Gene> {
    STRUCTURAL
        .into_iter()
        .chain((family == Family::HopperBwd).then_some(Gene::Exp))
        .filter(|g| g.applies(family) && *g != Gene::Family)
        .collect()
}

/// The genes of one family's kernels that no rule reads.
pub fn free_genes_in(family: Family) -> Vec<Gene> {
    let structural = structural_in(family);
    Gene::ALL
        .into_iter()
        .filter(|g| g.applies(family) && *g != Gene::Family && !structural.contains(g))
        .collect()
}

/// The genes a rule reads for some family of a pass, the family gene included: the
/// genes a repair may move. The forward's are [`STRUCTURAL`]'s that shape a forward
/// kernel, in its order; the backward adds `exp` last.
pub fn structural_for_pass(pass: Pass) -> Vec<Gene> {
    let mut genes: Vec<Gene> = STRUCTURAL
        .into_iter()
        .filter(|g| pass.families().any(|f| g.applies(f)))
        .collect();
    for f in pass.families() {
        for g in structural_in(f) {
            if !genes.contains(&g) {
                genes.push(g);
            }
        }
    }
    genes
}

/// Number of genomes in the full product of the forward's alleles.
pub fn total_size() -> u128 {
    total_size_for_pass(Pass::Forward)
}

/// Number of genomes in the full product of one pass's alleles: its families, and the
/// genes that shape any of them (the others held at their baseline).
pub fn total_size_for_pass(pass: Pass) -> u128 {
    pass.genes()
        .iter()
        .map(|&g| match g {
            Gene::Family => pass.families().count() as u128,
            g => g.allele_count() as u128,
        })
        .product()
}

/// Number of distinct kernels of one family (canonical genomes, valid or not).
pub fn family_size(family: Family) -> u128 {
    Gene::ALL
        .iter()
        .filter(|g| g.applies(family) && **g != Gene::Family)
        .map(|g| g.allele_count() as u128)
        .product()
}

/// All genomes over the given genes (others taken from `base`), in lexicographic allele order.
pub fn product(base: Genome, genes: &[Gene]) -> impl Iterator<Item = Genome> + '_ {
    let counts: Vec<usize> = genes.iter().map(|g| g.allele_count()).collect();
    let total: usize = counts.iter().product();
    (0..total).map(move |mut n| {
        let mut g = base;
        for (gene, &count) in genes.iter().zip(&counts).rev() {
            g = g.with_allele(*gene, n % count);
            n /= count;
        }
        g
    })
}

/// Number of valid forward kernels (canonical genomes) for a head dimension on a device.
pub fn count_valid(head_dim: HeadDim, target: Target) -> u128 {
    count_valid_for_pass(Pass::Forward, head_dim, target)
}

/// Number of valid kernels of one pass for a head dimension on a device.
pub fn count_valid_for_pass(pass: Pass, head_dim: HeadDim, target: Target) -> u128 {
    pass.families()
        .map(|f| count_valid_in(f, head_dim, target))
        .sum()
}

/// Number of valid kernels of one family.
pub fn count_valid_in(family: Family, head_dim: HeadDim, target: Target) -> u128 {
    let free: u128 = free_genes_in(family)
        .iter()
        .map(|g| g.allele_count() as u128)
        .product();
    let structural = structural_in(family);
    let base = Genome {
        family,
        ..Genome::baseline()
    };
    let valid = product(base, &structural)
        .filter(|g| g.is_valid(head_dim, target))
        .count() as u128;
    valid * free
}

/// Whether one family has a valid kernel: the walk of [`count_valid_in`], stopped at the
/// first valid genome (it comes early where there is one; counting walks everything).
pub fn any_valid_in(family: Family, head_dim: HeadDim, target: Target) -> bool {
    let structural = structural_in(family);
    let base = Genome {
        family,
        ..Genome::baseline()
    };
    let any = product(base, &structural).any(|g| g.is_valid(head_dim, target));
    any
}

/// A forward genome drawn uniformly from the full product (not canonical: genes that do
/// not apply to its family keep their draw).
pub fn random_genome<R: Rng + ?Sized>(rng: &mut R) -> Genome {
    random_genome_for_pass(Pass::Forward, rng)
}

/// A genome of one pass drawn uniformly from that pass's full product: one draw per
/// gene of the pass, in canonical order (the family among the pass's families); the
/// genes of no family of the pass stay at their baseline and draw nothing.
pub fn random_genome_for_pass<R: Rng + ?Sized>(pass: Pass, rng: &mut R) -> Genome {
    let families: Vec<Family> = pass.families().collect();
    let mut g = Genome::baseline();
    for gene in pass.genes() {
        if gene == Gene::Family {
            g.family = families[rng.random_range(0..families.len())];
        } else {
            g = g.with_allele(gene, rng.random_range(0..gene.allele_count()));
        }
    }
    g
}

/// A canonical forward genome drawn uniformly from the valid genomes of the full
/// product (rejection sampling), so each family is drawn about half the time.
pub fn sample_valid<R: Rng + ?Sized>(rng: &mut R, head_dim: HeadDim, target: Target) -> Genome {
    loop {
        let g = random_genome(rng);
        if g.is_valid(head_dim, target) {
            return g.canonical();
        }
    }
}

/// A canonical genome of one pass drawn uniformly from the valid genomes of its full
/// product (rejection sampling); `None` when the pass has no valid kernel there.
pub fn sample_valid_for_pass<R: Rng + ?Sized>(
    pass: Pass,
    rng: &mut R,
    head_dim: HeadDim,
    target: Target,
) -> Option<Genome> {
    if !pass.families().any(|f| any_valid_in(f, head_dim, target)) {
        return None;
    }
    loop {
        let g = random_genome_for_pass(pass, rng);
        if g.is_valid(head_dim, target) {
            return Some(g.canonical());
        }
    }
}

/// A canonical genome of one family, drawn uniformly from that family's valid kernels.
pub fn sample_valid_in<R: Rng + ?Sized>(
    rng: &mut R,
    family: Family,
    head_dim: HeadDim,
    target: Target,
) -> Option<Genome> {
    if !any_valid_in(family, head_dim, target) {
        return None;
    }
    loop {
        let g = Genome {
            family,
            ..random_genome_for_pass(family.pass(), rng)
        }
        .canonical();
        if g.is_valid(head_dim, target) {
            return Some(g);
        }
    }
}
