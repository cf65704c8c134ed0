//! `evo insights`: which gene changes paid off, over one or more experiments.

use anyhow::Context;
use evo_lineage::{insights, key_learnings, render_insights, render_key_learnings, Lineage};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct InsightsArgs {
    /// Experiment folders (each holding lineage.json); several give per-device and
    /// per-shape tables.
    #[arg(required = true)]
    pub experiments: Vec<PathBuf>,
}

pub fn run(args: InsightsArgs) -> anyhow::Result<()> {
    // One folder given twice would count each of its gene changes twice.
    let mut seen = std::collections::HashMap::new();
    for dir in &args.experiments {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if let Some(first) = seen.insert(key, dir) {
            anyhow::bail!(
                "{} and {} are one experiment; give each experiment once",
                first.display(),
                dir.display()
            );
        }
    }
    let lineages = args
        .experiments
        .iter()
        .map(|dir| {
            Lineage::load(&dir.join("lineage.json")).with_context(|| {
                format!(
                    "{} is not an experiment folder written by `evo evolve`",
                    dir.display()
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    print!("{}", render_insights(&insights(&lineages)));
    // Across several searches (one per shape class, say): what won on each.
    if lineages.len() > 1 {
        println!();
        print!("{}", render_key_learnings(&key_learnings(&lineages)));
    }
    Ok(())
}
