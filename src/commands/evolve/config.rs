//! `evo evolve`'s experiment config: from the command line for a new experiment, from
//! `experiment.toml` (checked against the options given) for one that exists.

use super::EvolveArgs;
use anyhow::{bail, Context};
use evo_gates::TimingSuite;
use evo_genome::{Dtype, GenomeFile, Problem};
use evo_mutator::{
    BudgetConfig, EvolutionParams, ExperimentConfig, IslandConfig, StrategyKind, EXPERIMENT_FILE,
};
use std::collections::BTreeMap;
use std::path::Path;

impl EvolveArgs {
    /// `[island]` of a new experiment, from --island and its companions.
    fn island_config(&self) -> Option<IslandConfig> {
        let island = self.island?;
        Some(IslandConfig {
            island,
            islands: self.islands.expect("clap requires --islands with --island"),
            exchange: self
                .exchange
                .clone()
                .expect("clap requires --exchange with --island"),
            every: self.migrate_every.unwrap_or(2),
            migrants: self.migrants.unwrap_or(2),
        })
    }
}

/// The named genomes in `dir`, by name.
pub(super) fn load_genomes(dir: &Path) -> anyhow::Result<BTreeMap<String, GenomeFile>> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "{}: cannot list the named genomes (use --genomes DIR)",
            dir.display()
        )
    })?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let file = GenomeFile::load(&path)?;
            out.insert(file.name.clone(), file);
        }
    }
    Ok(out)
}

/// The config from the command line, or the experiment's own file when it exists
/// (then any option given must agree with it).
pub(super) fn resolve_config(
    args: &EvolveArgs,
    dir: &Path,
    genomes: &BTreeMap<String, GenomeFile>,
) -> anyhow::Result<ExperimentConfig> {
    let path = dir.join(EXPERIMENT_FILE);
    if path.exists() {
        let config = ExperimentConfig::load(&path)?;
        let clash = |field: &str, given: String, recorded: String| -> anyhow::Result<()> {
            if given != recorded {
                bail!(
                    "{}: records {field} = {recorded}, but {given} was given; drop the option to resume, or use a new --experiment folder",
                    path.display()
                );
            }
            Ok(())
        };
        if let Some(s) = &args.strategy {
            clash("strategy", s.clone(), config.strategy.to_string())?;
        }
        if let Some(s) = args.seed {
            clash("seed", s.to_string(), config.seed.to_string())?;
        }
        if let Some(b) = &args.backend {
            clash("backend", b.clone(), config.backend.clone())?;
        }
        if let Some(asked) = args.island_config() {
            let recorded = config.island.clone();
            if recorded.as_ref() != Some(&asked) {
                let show = |c: Option<&IslandConfig>| {
                    c.map_or("no [island]".to_string(), |c| {
                        format!(
                            "island {} of {} (exchange {}, every {}, migrants {})",
                            c.island,
                            c.islands,
                            c.exchange.display(),
                            c.every,
                            c.migrants
                        )
                    })
                };
                clash("[island]", show(Some(&asked)), show(recorded.as_ref()))?;
            }
        }
        if let Some(p) = args.population {
            clash(
                "population",
                p.to_string(),
                config.evolutionary.population.to_string(),
            )?;
        }
        if args.pipeline {
            clash(
                "[evolutionary] pipeline",
                "true".into(),
                config.evolutionary.pipeline.to_string(),
            )?;
        }
        if args.steady {
            clash(
                "[evolutionary] steady",
                "true".into(),
                config.evolutionary.steady.to_string(),
            )?;
        }
        if let Some(n) = args.in_flight {
            clash(
                "[evolutionary] in_flight",
                n.to_string(),
                config
                    .evolutionary
                    .in_flight
                    .map_or("none".into(), |r| r.to_string()),
            )?;
        }
        // A larger budget continues the experiment: the cache answers what was done.
        let mut config = config;
        if args.budget.is_some() || args.minutes.is_some() {
            config.budget = BudgetConfig {
                evaluations: args.budget,
                minutes: args.minutes,
            };
            config.save(&path)?;
        }
        return Ok(config);
    }
    let name = dir
        .file_name()
        .map_or("experiment".into(), |n| n.to_string_lossy().into_owned());
    let config = config_from_args(args, &name, genomes)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create the experiment folder", dir.display()))?;
    config.save(&path)?;
    Ok(config)
}

/// A new experiment's config from the command line and the defaults, checked like a file.
pub(super) fn config_from_args(
    args: &EvolveArgs,
    name: &str,
    genomes: &BTreeMap<String, GenomeFile>,
) -> anyhow::Result<ExperimentConfig> {
    let mut evolutionary = EvolutionParams {
        pipeline: args.pipeline,
        steady: args.steady,
        in_flight: args.in_flight,
        ..EvolutionParams::default()
    };
    if let Some(p) = args.population {
        evolutionary.population = p;
        evolutionary.elites = evolutionary.elites.min(p.saturating_sub(1));
    }
    let config = ExperimentConfig {
        name: name.to_string(),
        strategy: args
            .strategy
            .as_deref()
            .map_or(StrategyKind::Evolutionary, |s| {
                StrategyKind::parse(s).expect("clap checked it")
            }),
        seed: args.seed.unwrap_or_else(|| match args.island {
            Some(k) => u64::from(k) + 1,
            None if super::on_gpu(args.backend.as_deref()) => crate::commands::gate::fresh_seed(),
            None => 1,
        }),
        backend: args.backend.clone().unwrap_or_else(|| "auto".into()),
        seeds: genomes.keys().cloned().collect(),
        budget: BudgetConfig {
            evaluations: if args.minutes.is_some() {
                None
            } else {
                Some(args.budget.unwrap_or(200))
            },
            minutes: args.minutes,
        },
        evolutionary,
        problem: args
            .problem
            .as_deref()
            .map(str::parse::<Problem>)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--problem {e}"))?,
        suite: match args.suite.as_deref() {
            Some(name) => TimingSuite::parse(name)
                .expect("clap checked the suite")
                .problems(Dtype::F16),
            None => Vec::new(),
        },
        target: None,
        subspace: None,
        island: args.island_config(),
    };
    // Round-trip through the checker so the command line gets the file's checks.
    let text = toml::to_string(&config)?;
    ExperimentConfig::from_toml_str(&text, Path::new("the command line"))
        .map_err(|e| anyhow::anyhow!("{e}").context("the command-line options are inconsistent"))
}
