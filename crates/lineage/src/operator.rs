//! How a candidate was made: the label of a lineage edge.

use evo_genome::{Gene, GenomeId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One step of making a genome. A child carries the list of steps that made it,
/// in the order they were applied (e.g. crossover, then a mutation, then a repair).
///
/// Alleles are stored as their TOML labels (`"cp_async"`, `"64"`), so a lineage
/// file reads without the genome crate and survives a reordering of allele lists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operator {
    /// A named genome from `genomes/*.toml`.
    Seed { name: String },
    /// Drawn uniformly from the valid space.
    Random,
    /// The `index`-th point of an exhaustive walk over a declared sub-space.
    Enumerate { index: u64 },
    /// One gene moved: ordered genes to a neighbour, categorical ones to any other allele.
    Mutate {
        gene: Gene,
        from: String,
        to: String,
    },
    /// Uniform crossover with a second parent (the first parent is the edge's source).
    Crossover { other: GenomeId },
    /// A change made by repair to turn an invalid genome into the nearest valid one.
    Repair {
        gene: Gene,
        from: String,
        to: String,
    },
    /// An elite of another island, taken in with that island's measurement from what
    /// it published after `generation`.
    Immigrant { island: u32, generation: u32 },
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operator::Seed { name } => write!(f, "seed {name}"),
            Operator::Random => f.write_str("random"),
            Operator::Enumerate { index } => write!(f, "sub-space point #{index}"),
            Operator::Mutate { gene, from, to } => write!(f, "mutate {gene} {from}→{to}"),
            Operator::Crossover { other } => write!(f, "crossover with {other}"),
            Operator::Repair { gene, from, to } => write!(f, "repair {gene} {from}→{to}"),
            Operator::Immigrant { island, generation } => {
                write!(
                    f,
                    "immigrant from island {island} (generation {generation})"
                )
            }
        }
    }
}
