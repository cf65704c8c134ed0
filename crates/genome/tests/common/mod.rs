//! What the genome crate's integration tests share: the named `fa3` genome and the rules
//! a genome fails on the H100.

use evo_genome::{Genome, GenomeFile, HeadDim, Rule, Target};

/// The named `fa3` genome (genomes/fa3.toml): two consumer warpgroups, no split.
pub fn fa3() -> Genome {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa3.toml");
    GenomeFile::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .genes
}

/// The rules `g` fails at head dim `d` on sm_90, in the order they are checked.
pub fn failed(g: &Genome, d: HeadDim) -> Vec<Rule> {
    g.violations(d, Target::Sm90)
        .iter()
        .map(|v| v.rule)
        .collect()
}
