//! The valid space: every genome that passes the rules, counted, enumerated and sampled.
//!
//! The full product of alleles is about 95 million genomes. Only the
//! *structural* genes (math, residence, tiles, warps, stages, layout) take part
//! in the rules; the others (producer warps, load kind, vector width, exp,
//! split, register cap, min blocks) never change validity. Counting therefore
//! walks the structural product (27,648 points) and multiplies by the free
//! product; a test checks the independence claim on random genomes.

use crate::genes::{Gene, Genome};
use crate::problem::HeadDim;
use crate::target::Target;
use rand::Rng;

/// Genes that appear in at least one validity rule.
pub const STRUCTURAL: [Gene; 9] = [
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

/// Number of valid genomes for a head dimension on a device.
pub fn count_valid(head_dim: HeadDim, target: Target) -> u128 {
    let free: u128 = free_genes()
        .iter()
        .map(|g| g.allele_count() as u128)
        .product();
    let structural = product(Genome::baseline(), &STRUCTURAL)
        .filter(|g| g.is_valid(head_dim, target))
        .count() as u128;
    structural * free
}

/// A genome drawn uniformly from the full product.
pub fn random_genome<R: Rng + ?Sized>(rng: &mut R) -> Genome {
    let mut g = Genome::baseline();
    for gene in Gene::ALL {
        g = g.with_allele(gene, rng.random_range(0..gene.allele_count()));
    }
    g
}

/// A genome drawn uniformly from the valid space (rejection sampling: uniform over the
/// product, kept only when valid, so every valid genome is equally likely).
pub fn sample_valid<R: Rng + ?Sized>(rng: &mut R, head_dim: HeadDim, target: Target) -> Genome {
    loop {
        let g = random_genome(rng);
        if g.is_valid(head_dim, target) {
            return g;
        }
    }
}
