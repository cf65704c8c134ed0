//! The seeds' hand evolution as the first recorded lineage:
//! scalar v3 → WMMA Q·Kᵀ v5 → full WMMA v6a → cp.async + producer warp v7a → fa2.
//!
//! Each step's operators are the gene differences between consecutive named
//! genomes. The seeds measured v3..v7a on an NVIDIA L4 at B1 H8 L512 D64 f16
//! (their own notes); `fa2` is our template's genome of FlashAttention-2's
//! design, never measured by the seeds, so it stays unmeasured until replayed.

use crate::graph::{Lineage, LineageError, LineageMeta, Node};
use crate::operator::Operator;
use evo_genome::{Genome, GenomeFile, Problem};
use evo_record::Evaluation;
use thiserror::Error;

/// The named genomes of the hand evolution, root first.
pub const SEED_PATH: [&str; 5] = ["v3", "v5", "v6a", "v7a", "fa2"];

/// The device of the seeds' own figures.
pub const SEEDS_DEVICE: &str = "NVIDIA L4 (seeds' record)";

/// The seeds' own latencies on the L4 at B1 H8 L512 D64 f16, µs.
pub const SEEDS_L4_US: [(&str, f64); 4] = [
    ("v3", 1750.0),
    ("v5", 1980.0),
    ("v6a", 1177.0),
    ("v7a", 1162.0),
];

#[derive(Debug, Error)]
pub enum SeedLineageError {
    #[error("named genome `{0}` of the seeds' path v3 → v5 → v6a → v7a → fa2 was not given; expected genomes/{0}.toml")]
    Missing(&'static str),
    #[error(transparent)]
    Lineage(#[from] LineageError),
}

/// The timing method of a figure quoted from the seeds' notes rather than measured here.
pub const SEEDS_METHOD: &str = "seeds' record";

/// The seeds' recorded figure for a named genome as an evaluation (one timing at the
/// seed shape; the seeds recorded no spread, so min = median = max).
pub fn seeds_record(name: &str, genome: &Genome) -> Option<Evaluation> {
    let us = SEEDS_L4_US.iter().find(|(n, _)| *n == name)?.1;
    Some(Evaluation::summarized(
        *genome,
        SEEDS_DEVICE,
        Problem::seed(),
        us,
        SEEDS_METHOD,
    ))
}

/// Builds the seeds' lineage from the named genomes; `measure` gives each step's
/// evaluation (use [`seeds_record`] for the seeds' own figures, or a replay's).
pub fn seed_lineage(
    named: &[GenomeFile],
    measure: impl Fn(&str, &Genome) -> Option<Evaluation>,
) -> Result<Lineage, SeedLineageError> {
    let mut lineage = Lineage::new(LineageMeta {
        title: "seeds' hand evolution".into(),
        device: SEEDS_DEVICE.into(),
        objective: Problem::seed().label(),
        strategy: "hand".into(),
        seed: None,
    });
    let mut parent: Option<Genome> = None;
    for (generation, name) in SEED_PATH.into_iter().enumerate() {
        let file = named
            .iter()
            .find(|f| f.name == name)
            .ok_or(SeedLineageError::Missing(name))?;
        let genome = file.genes;
        let operators = match parent {
            None => vec![Operator::Seed { name: name.into() }],
            Some(p) => p
                .diff(&genome)
                .into_iter()
                .map(|gene| Operator::Mutate {
                    gene,
                    from: p.allele_label(gene),
                    to: genome.allele_label(gene),
                })
                .collect(),
        };
        let parents: Vec<_> = parent.iter().map(Genome::id).collect();
        lineage.add(
            Node {
                id: genome.id(),
                genome,
                name: Some(name.into()),
                generation: generation as u32,
                operators,
                evaluation: measure(name, &genome),
                island: None,
            },
            &parents,
        )?;
        parent = Some(genome);
    }
    Ok(lineage)
}
