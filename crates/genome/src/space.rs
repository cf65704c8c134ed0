//! The valid space: every genome that passes the rules, counted, enumerated and sampled.
//!
//! A genome is counted once per kernel: in its canonical form, with the genes that do
//! not apply to its family at their baseline ([`Genome::canonical`]). Only the
//! *structural* genes (family, math, residence, tiles, warps, consumer warpgroups,
//! stages, layout, the persistent grid, chained overlap, the split, the cluster
//! merge, O's store path and what the consumer warpgroups split) take part in the rules; the others (producer warps, load kinds, vector width,
//! exp, register cap, min blocks, packed grouped heads) never change validity. Counting therefore walks the structural product of each family
//! and multiplies by that family's free product; a test checks the independence
//! claim on random genomes.

use crate::genes::{Family, Gene, Genome};
use crate::problem::HeadDim;
use crate::target::Target;
use rand::Rng;

/// Genes that appear in at least one validity rule.
pub const STRUCTURAL: [Gene; 19] = [
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
];

/// Genes no rule reads.
pub fn free_genes() -> Vec<Gene> {
    Gene::ALL
        .into_iter()
        .filter(|g| !STRUCTURAL.contains(g))
        .collect()
}

/// Number of genomes in the full product of alleles.
pub fn total_size() -> u128 {
    Gene::ALL.iter().map(|g| g.allele_count() as u128).product()
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

/// Number of valid kernels (canonical genomes) for a head dimension on a device.
pub fn count_valid(head_dim: HeadDim, target: Target) -> u128 {
    Family::ALL
        .iter()
        .map(|&f| count_valid_in(f, head_dim, target))
        .sum()
}

/// Number of valid kernels of one family.
pub fn count_valid_in(family: Family, head_dim: HeadDim, target: Target) -> u128 {
    let applies = |g: &Gene| g.applies(family) && *g != Gene::Family;
    let free: u128 = free_genes()
        .iter()
        .filter(|g| applies(g))
        .map(|g| g.allele_count() as u128)
        .product();
    let structural: Vec<Gene> = STRUCTURAL.into_iter().filter(applies).collect();
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
    let structural: Vec<Gene> = STRUCTURAL
        .into_iter()
        .filter(|g| g.applies(family) && *g != Gene::Family)
        .collect();
    let base = Genome {
        family,
        ..Genome::baseline()
    };
    let any = product(base, &structural).any(|g| g.is_valid(head_dim, target));
    any
}

/// A genome drawn uniformly from the full product (not canonical: genes that do not
/// apply to its family keep their draw).
pub fn random_genome<R: Rng + ?Sized>(rng: &mut R) -> Genome {
    let mut g = Genome::baseline();
    for gene in Gene::ALL {
        g = g.with_allele(gene, rng.random_range(0..gene.allele_count()));
    }
    g
}

/// A canonical genome drawn uniformly from the valid genomes of the full product
/// (rejection sampling), so each family is drawn about half the time.
pub fn sample_valid<R: Rng + ?Sized>(rng: &mut R, head_dim: HeadDim, target: Target) -> Genome {
    loop {
        let g = random_genome(rng);
        if g.is_valid(head_dim, target) {
            return g.canonical();
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
            ..random_genome(rng)
        }
        .canonical();
        if g.is_valid(head_dim, target) {
            return Some(g);
        }
    }
}
