//! The kernels `evo gate`, `evo bench` and `evo profile` are given: genome files and
//! hand-written `.cu` files, read into the gates' kernel sources.

use anyhow::Context;
use evo_gates::compile::KernelSource;
use evo_genome::GenomeFile;
use std::path::PathBuf;

/// Genome files and hand-written `.cu` files as the gates' kernel sources, in order.
pub fn load_sources(genomes: &[PathBuf], files: &[PathBuf]) -> anyhow::Result<Vec<KernelSource>> {
    let mut sources = Vec::new();
    for path in genomes {
        let f = GenomeFile::load(path)?;
        sources.push(KernelSource::Genome {
            name: f.name,
            genome: f.genes,
        });
    }
    for path in files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        sources.push(KernelSource::File {
            path: path.display().to_string(),
            text,
        });
    }
    Ok(sources)
}
