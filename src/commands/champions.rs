//! `evo champions`: per-shape champions as data, from the searches that found them;
//! `evo dispatch`: which champion a shape gets, and why.
//!
//! ```text
//! genomes/champions/<device>/
//!   dispatch.toml          device, and one [[class]] per shape: shape, champion file,
//!                          experiment, and the figures of the bench that measured it
//!   <class>.toml           the champion genome, with a header: shape, µs, speed-up
//!                          against cuDNN in the same run, experiment
//! ```
//! `evo bench --champions DIR --record` fills in (and refreshes) the figures.

use anyhow::{bail, Context};
use evo_genome::dispatch::{DispatchTable, ShapeClass, DISPATCH_FILE};
use evo_genome::{GenomeFile, Problem};
use evo_lineage::Lineage;
use evo_mutator::{ExperimentConfig, EXPERIMENT_FILE};
use std::path::{Path, PathBuf};

/// The champions folder of a device: `genomes/champions/h100` for an H100.
pub const DEFAULT_CHAMPIONS: &str = "genomes/champions/h100";

#[derive(Debug, clap::Args)]
pub struct ChampionsArgs {
    /// Experiment folders of `evo evolve --problem ...` searches (one shape each).
    #[arg(required = true)]
    pub experiments: Vec<PathBuf>,
    /// The champions folder to write (classes already there and not searched again
    /// are kept).
    #[arg(long, default_value = DEFAULT_CHAMPIONS)]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// The shape, `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]`, e.g. `2,8,2048,2048,128,bf16,causal`.
    pub shape: String,
    /// The champions folder whose dispatch.toml to read.
    #[arg(long, default_value = DEFAULT_CHAMPIONS)]
    pub champions: PathBuf,
}

/// One search's champion.
struct Found {
    problem: Problem,
    genome: evo_genome::Genome,
    us: f64,
    device: String,
    experiment: PathBuf,
    seed_of: Option<String>,
}

fn found(dir: &Path) -> anyhow::Result<Found> {
    let config = ExperimentConfig::load(&dir.join(EXPERIMENT_FILE))?;
    // No [problem]: `evo evolve`'s default objective, the seed shape.
    let problem = config.problem.unwrap_or_else(Problem::seed);
    if !config.suite.is_empty() {
        bail!(
            "{}: a suite search has no one shape; per-shape champions come from `evo evolve --problem SPEC`",
            dir.join(EXPERIMENT_FILE).display()
        );
    }
    let lineage = Lineage::load(&dir.join("lineage.json")).with_context(|| {
        format!(
            "{} is not an experiment folder written by `evo evolve`",
            dir.display()
        )
    })?;
    let champion = lineage
        .champion()
        .with_context(|| format!("{}: no candidate passed the gates", dir.display()))?;
    let us = champion.score_us().expect("a champion is timed");
    Ok(Found {
        problem,
        genome: champion.genome,
        us,
        device: lineage.meta.device.clone(),
        experiment: dir.components().collect(),
        seed_of: lineage
            .champion_path()
            .first()
            .and_then(|root| root.name.clone()),
    })
}

/// The header of a champion file.
pub fn champion_header(class: &ShapeClass, device: &str) -> String {
    let mut h = format!(
        "Champion of {} on {device} (`evo champions`).\nShape: {} (either dtype; the bench measures both).\nEvolved in: {}\n",
        class.name, class.shape, class.experiment
    );
    match (class.median_us, class.cudnn_us, class.speedup_vs_cudnn) {
        (Some(us), Some(cudnn), Some(x)) => {
            h += &format!(
                "Measured: {us:.2} µs, PyTorch SDPA cuDNN {cudnn:.2} µs in the same run: {x:.2}x{} ({}).\n",
                class
                    .cold_ratio()
                    .map(|(c, cc, r)| format!("; cold L2 {c:.2} µs against {cc:.2}: {r:.2}x"))
                    .unwrap_or_default(),
                class.bench.as_deref().unwrap_or("bench")
            );
        }
        (Some(us), _, _) => h += &format!("Measured: {us:.2} µs (no cuDNN figure in that run).\n"),
        _ => h += "Not benched yet: `evo bench --champions DIR --record`.\n",
    }
    h
}

/// Writes every champion file of `table` in `dir` with its header.
pub fn write_champions(
    dir: &Path,
    table: &DispatchTable,
    genomes: &[(String, evo_genome::Genome)],
) -> anyhow::Result<()> {
    for class in &table.classes {
        let Some((_, genome)) = genomes.iter().find(|(n, _)| *n == class.name) else {
            continue;
        };
        let file = GenomeFile {
            name: format!("champion-{}", class.name),
            description: String::new(),
            genes: *genome,
        };
        file.save(
            &dir.join(&class.champion),
            &champion_header(class, &table.device),
        )?;
    }
    Ok(())
}

pub fn run(args: ChampionsArgs) -> anyhow::Result<()> {
    let mut found: Vec<Found> = args
        .experiments
        .iter()
        .map(|d| found(d))
        .collect::<anyhow::Result<_>>()?;
    let device = found[0].device.clone();
    if let Some(other) = found.iter().find(|f| f.device != device) {
        bail!(
            "{} was searched on {}, {} on {device}: one champions folder holds one GPU model's",
            other.experiment.display(),
            other.device,
            found[0].experiment.display()
        );
    }
    let path = args.out.join(DISPATCH_FILE);
    let mut table = if path.exists() {
        let t = DispatchTable::load(&path)?;
        if t.device != device {
            bail!(
                "{}: its champions are {}'s, these searches ran on {device}; use another --out",
                path.display(),
                t.device
            );
        }
        t
    } else {
        DispatchTable {
            device: device.clone(),
            classes: Vec::new(),
        }
    };
    // The fastest of the searches of one class wins it.
    found.sort_by(|a, b| a.us.total_cmp(&b.us));
    let mut genomes: Vec<(String, evo_genome::Genome)> = Vec::new();
    for f in &found {
        let name = ShapeClass::name_of(&f.problem);
        if genomes.iter().any(|(n, _)| *n == name) {
            continue;
        }
        println!(
            "{name}: {} at {:.2} µs in {}{}",
            f.genome.id(),
            f.us,
            f.experiment.display(),
            f.seed_of
                .as_deref()
                .map(|s| format!(" (descends from {s})"))
                .unwrap_or_default()
        );
        let class = ShapeClass {
            name: name.clone(),
            shape: f.problem.spec(),
            champion: format!("{name}.toml"),
            experiment: f.experiment.display().to_string(),
            median_us: None,
            cudnn_us: None,
            speedup_vs_cudnn: None,
            cold_us: None,
            cudnn_cold_us: None,
            bench: None,
        };
        match table.classes.iter_mut().find(|c| c.name == name) {
            Some(c) => *c = class,
            None => table.classes.push(class),
        }
        genomes.push((name, f.genome));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    write_champions(&args.out, &table, &genomes)?;
    std::fs::write(&path, table.to_toml_string(TABLE_HEADER))
        .with_context(|| format!("{}: cannot write", path.display()))?;
    println!(
        "wrote {} champions and {}; time them with `evo bench --champions {} --record`",
        genomes.len(),
        path.display(),
        args.out.display()
    );
    Ok(())
}

/// The comment at the top of every dispatch.toml.
pub const TABLE_HEADER: &str =
    "Per-shape champions and the table that dispatches them (`evo dispatch SPEC`).
Written by `evo champions EXPERIMENT...`; figures by `evo bench --champions DIR --record`.
Rule for a shape between classes: same head dim; same kind (mask, window, grouped heads)
if any class has it, else the same mask if any has it; then the nearest in work
|log2(B*H*Lq*Lk) - log2(class's)|; ties to the nearest key length, then the nearest group.
The dtype is not a class: each champion is built for f16 and bf16.";

pub fn run_dispatch(args: DispatchArgs) -> anyhow::Result<()> {
    let problem: Problem = args
        .shape
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{e}"))?;
    let path = args.champions.join(DISPATCH_FILE);
    let table = DispatchTable::load(&path).with_context(|| {
        format!(
            "no dispatch table at {} (make one with `evo champions EXPERIMENT... --out {}`)",
            path.display(),
            args.champions.display()
        )
    })?;
    let choice = table.choose(&problem, &path)?;
    let file = args.champions.join(&choice.class.champion);
    let genome = GenomeFile::load(&file)?;
    println!("{problem} -> {} ({})", choice.class.name, file.display());
    println!("  why: {}", choice.reason);
    println!("  genome {}: {}", genome.genes.id(), genome.genes.summary());
    if let Some(us) = choice.class.median_us {
        println!(
            "  on its own shape {}: {us:.2} µs{} ({})",
            choice.class_problem,
            choice
                .class
                .speedup_vs_cudnn
                .map(|x| format!(", {x:.2}x cuDNN in the same run"))
                .unwrap_or_default()
                + &choice
                    .class
                    .cold_ratio()
                    .map(|(_, _, r)| format!(" ({r:.2}x cold L2)"))
                    .unwrap_or_default(),
            choice.class.bench.as_deref().unwrap_or("bench")
        );
    }
    if choice.considered.len() > 1 {
        println!("  classes considered (distance in doublings of work):");
        for (c, d) in &choice.considered {
            println!("    {:<28} {d:>5.2}", c.name);
        }
    }
    let violations = genome
        .genes
        .violations(problem.head_dim, evo_genome::Target::Sm90);
    if !violations.is_empty() {
        bail!(
            "{}: the champion cannot be built at {problem}: {}",
            file.display(),
            violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class() -> ShapeClass {
        ShapeClass {
            name: "b16-h32kv8-lq1-lk8192-d128-causal-br".into(),
            shape: "16,32,1,8192,128,f16,causal=br,kv=8".into(),
            champion: "c.toml".into(),
            experiment: "experiments/x/search".into(),
            median_us: Some(179.5),
            cudnn_us: Some(210.66),
            speedup_vs_cudnn: Some(210.66 / 179.5),
            cold_us: None,
            cudnn_cold_us: None,
            bench: Some("experiments/x/record.json (H100, f16)".into()),
        }
    }

    #[test]
    fn the_header_gives_the_cold_comparison_beside_the_replayed_one() {
        let without = champion_header(&class(), "H100");
        assert!(
            without.contains("PyTorch SDPA cuDNN 210.66 µs in the same run: 1.17x (experiments"),
            "{without}"
        );
        assert!(!without.contains("cold"), "{without}");
        let with = champion_header(
            &ShapeClass {
                cold_us: Some(179.23),
                cudnn_cold_us: Some(179.25),
                ..class()
            },
            "H100",
        );
        assert!(
            with.contains(
                "1.17x; cold L2 179.23 µs against 179.25: 1.00x (experiments/x/record.json"
            ),
            "{with}"
        );
        // Only one of the pair: no cold ratio is made up.
        let half = champion_header(
            &ShapeClass {
                cold_us: Some(179.23),
                ..class()
            },
            "H100",
        );
        assert!(!half.contains("cold"), "{half}");
    }
}
