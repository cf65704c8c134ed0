//! `evo lineage`: an experiment's lineage as the evolution-path table, DOT or SVG.
//!
//! The files it writes (`--save`, `--svg`) are checked before the lineage is read: an
//! existing file is replaced only with `--force` (a `--save` onto an experiment's own
//! lineage.json would replace what a search recorded).

use anyhow::{bail, Context};
use evo_genome::GenomeFile;
use evo_lineage::{
    render_markdown, seed_lineage, seeds_record, to_dot, write_svg, Lineage, SEED_PATH,
};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct LineageArgs {
    /// Experiment folder holding lineage.json (written by `evo evolve`).
    #[arg(required_unless_present = "seeds")]
    pub experiment: Option<PathBuf>,
    /// Print Graphviz DOT instead of Markdown (the path to the champion in red).
    #[arg(long)]
    pub dot: bool,
    /// Also render the graph to this SVG file (needs graphviz `dot`).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// The seeds' hand evolution v3 → v5 → v6a → v7a → fa2 with the seeds' own L4 figures.
    #[arg(long, conflicts_with = "experiment")]
    pub seeds: bool,
    /// Write the lineage as JSON to this file (with --seeds: record the seeds' lineage as
    /// an experiment that `evo replay` can re-measure).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Replace the --save and --svg files when they exist.
    #[arg(long)]
    pub force: bool,
    /// Folder of the named genomes (for --seeds).
    #[arg(long, default_value = "genomes")]
    pub genomes: PathBuf,
}

pub fn run(args: LineageArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.save {
        super::check_new_file(path, args.force, "--save")?;
    }
    if let Some(path) = &args.svg {
        super::check_new_file(path, args.force, "--svg")?;
    }
    let lineage = if args.seeds {
        let named = SEED_PATH
            .iter()
            .map(|n| GenomeFile::load(&args.genomes.join(format!("{n}.toml"))))
            .collect::<Result<Vec<_>, _>>()?;
        seed_lineage(&named, seeds_record)?
    } else {
        let Some(dir) = &args.experiment else {
            bail!("give an experiment folder, or --seeds");
        };
        let path = dir.join("lineage.json");
        Lineage::load(&path).with_context(|| {
            format!(
                "{} is not an experiment folder written by `evo evolve`",
                dir.display()
            )
        })?
    };
    if let Some(path) = &args.save {
        lineage.save(path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(svg) = &args.svg {
        write_svg(&lineage, svg)?;
        eprintln!("wrote {}", svg.display());
    }
    if args.dot {
        print!("{}", to_dot(&lineage));
    } else {
        print!("{}", render_markdown(&lineage));
    }
    Ok(())
}
