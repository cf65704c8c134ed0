//! `evo evolve`'s experiment config: from the command line for a new experiment, from
//! `experiment.toml` (checked against the options given) for one that exists.

use super::EvolveArgs;
use anyhow::Context;
use evo_gates::TimingSuite;
use evo_genome::{Dtype, GenomeFile, Pass, Problem};
use evo_lineage::Lineage;
use evo_mutator::{
    Budget, BudgetConfig, EvolutionParams, ExperimentConfig, IslandConfig, StrategyKind,
    EXPERIMENT_FILE,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

impl EvolveArgs {
    /// The pass asked for (`--pass`), forward when none.
    pub fn pass(&self) -> Pass {
        match self.pass.as_deref() {
            Some("backward") => Pass::Backward,
            _ => Pass::Forward,
        }
    }

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

/// Why `evo evolve` will not take a folder as asked: its record disagrees with an option,
/// or it holds files that are not an experiment. The default folder then moves on to the
/// next free name; a folder named with --experiment is refused.
#[derive(Debug)]
pub(super) struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// An experiment's config as resolved, not yet written.
pub(super) struct Resolved {
    pub config: ExperimentConfig,
    /// experiment.toml must be (re)written once the search can start: a new experiment,
    /// or a raised budget.
    pub write: bool,
    /// The folder already held an experiment.
    pub resumed: bool,
}

/// The config from the command line, or the experiment's own file when it exists
/// (then every option that shapes the search must agree with it). Writes nothing: a
/// start that fails (no GPU, a missing seed) must not fix its options in the folder.
pub(super) fn resolve_config(
    args: &EvolveArgs,
    dir: &Path,
    genomes: &BTreeMap<String, GenomeFile>,
) -> anyhow::Result<Resolved> {
    let path = dir.join(EXPERIMENT_FILE);
    if path.exists() {
        let config = ExperimentConfig::load(&path)?;
        let (config, write) = check_resume(args, &path, config)?;
        return Ok(Resolved {
            config,
            write,
            resumed: true,
        });
    }
    refuse_foreign(dir)?;
    let name = dir
        .file_name()
        .map_or("experiment".into(), |n| n.to_string_lossy().into_owned());
    Ok(Resolved {
        config: config_from_args(args, &name, genomes)?,
        write: true,
        resumed: false,
    })
}

/// A folder without experiment.toml is a new experiment only when it is empty: files
/// there (evaluations, a lineage, anything) are someone's, and a new default search
/// would mix its records with them and replace their lineage.
fn refuse_foreign(dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(Refusal(format!(
            "{} is a file, not an experiment folder; choose another --experiment",
            dir.display()
        ))
        .into());
    }
    let Some((_, shown)) = evo_gates::outcome::files::other_files(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
    else {
        return Ok(());
    };
    Err(Refusal(format!(
        "{} holds {shown} but no {EXPERIMENT_FILE}: it is not an experiment evo can resume, and a new search there would mix its records with these; choose a new --experiment folder, or restore its {EXPERIMENT_FILE}",
        dir.display()
    ))
    .into())
}

/// Every option given must agree with the record; a budget may only grow. Returns the
/// config to run and whether its file must be rewritten (a raised budget).
fn check_resume(
    args: &EvolveArgs,
    path: &Path,
    config: ExperimentConfig,
) -> anyhow::Result<(ExperimentConfig, bool)> {
    let clash = |field: &str, given: String, recorded: String| -> anyhow::Result<()> {
        if given != recorded {
            return Err(Refusal(format!(
                "{}: records {field} = {recorded}, but {given} was given; drop the option to resume, or use a new --experiment folder",
                path.display()
            ))
            .into());
        }
        Ok(())
    };
    if let Some(s) = &args.strategy {
        clash("strategy", s.clone(), config.strategy.to_string())?;
    }
    if let Some(d) = &args.model_data {
        let recorded = config
            .model_data
            .as_ref()
            .map_or("none".into(), |r| r.display().to_string());
        clash("model_data", d.display().to_string(), recorded)?;
    }
    if let Some(s) = args.seed {
        clash("seed", s.to_string(), config.seed.to_string())?;
    }
    if args.pass.is_some() {
        clash("pass", args.pass().to_string(), config.pass.to_string())?;
    }
    if let Some(b) = &args.backend {
        clash("backend", b.clone(), config.backend.clone())?;
    }
    if let Some(spec) = &args.problem {
        let given: Problem = spec.parse().map_err(|e| anyhow::anyhow!("--problem {e}"))?;
        if config.problem != Some(given) {
            clash(
                "problem",
                given.spec(),
                config
                    .problem
                    .map_or("none (the backend's own shape)".into(), |p| p.spec()),
            )?;
        }
    }
    if let Some(name) = &args.suite {
        let given = TimingSuite::parse(name)
            .expect("clap checked the suite")
            .problems(Dtype::F16);
        if config.suite != given {
            let show = |suite: &[Problem]| match suite {
                [] => "none (one problem)".to_string(),
                many => many
                    .iter()
                    .map(Problem::spec)
                    .collect::<Vec<_>>()
                    .join("; "),
            };
            clash(
                "suite",
                format!("{name} ({})", show(&given)),
                show(&config.suite),
            )?;
        }
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
    let budget = grown_budget(args, path, &config.budget)?;
    let write = budget.is_some();
    let mut config = config;
    if let Some(budget) = budget {
        config.budget = budget;
    }
    Ok((config, write))
}

/// The wall time a resumed search's earlier runs spent, from its lineage.
pub(super) struct Spent {
    /// As recorded.
    pub wall_s: f64,
    pub time: Duration,
    pub limit: Duration,
    /// Candidates in the lineage on file.
    pub candidates: usize,
}

impl Spent {
    /// No time is left.
    pub fn is_all(&self) -> bool {
        self.time >= self.limit
    }
}

/// What the earlier runs of a resumed search under a wall budget spent, as its lineage
/// records (`wall_s`); `None` for a new search, an evaluation budget, or a lineage
/// written without it (its clock starts at 0).
pub(super) fn spent_before(
    resumed: bool,
    lineage_path: &Path,
    budget: Budget,
) -> anyhow::Result<Option<Spent>> {
    let Budget::Wall(limit) = budget else {
        return Ok(None);
    };
    if !resumed || !lineage_path.exists() {
        return Ok(None);
    }
    let lineage = Lineage::load(lineage_path)?;
    let Some(seconds) = lineage.wall_s else {
        return Ok(None);
    };
    let time = Duration::try_from_secs_f64(seconds).map_err(|_| {
        Refusal(format!(
            "{}: wall_s = {seconds} is not a time this search can have spent; correct or remove the field",
            lineage_path.display()
        ))
    })?;
    Ok(Some(Spent {
        wall_s: seconds,
        time,
        limit,
        candidates: lineage.len(),
    }))
}

/// The budget a resume runs to: a total that only grows. A lower one would replay only
/// the first evaluations and cut the recorded lineage short; a budget of the other kind
/// (evaluations against minutes) cannot be compared, so it is refused too. `None`: keep
/// the recorded one. Minutes are a total too: the wall time earlier runs spent, which
/// the lineage records ([`spent_before`]), counts against them.
fn grown_budget(
    args: &EvolveArgs,
    path: &Path,
    recorded: &BudgetConfig,
) -> anyhow::Result<Option<BudgetConfig>> {
    let refuse = |text: String| -> anyhow::Result<Option<BudgetConfig>> {
        Err(Refusal(format!("{}: {text}", path.display())).into())
    };
    match (args.budget, args.minutes, recorded.evaluations, recorded.minutes) {
        (None, None, ..) => Ok(None),
        (Some(n), _, Some(total), _) if n < total => refuse(format!(
            "records budget.evaluations = {total}, a total; --budget {n} would cut the recorded lineage short: give --budget {total} or more to go on, or drop the option"
        )),
        (None, Some(m), None, Some(total)) if m < total => refuse(format!(
            "records budget.minutes = {total}, a total; --minutes {m} would cut the search short: give --minutes {total} or more to go on, or drop the option"
        )),
        (Some(n), _, None, Some(total)) => refuse(format!(
            "records budget.minutes = {total}; --budget {n} counts evaluations, which cannot be compared with it: give --minutes {total} or more to go on, or use a new --experiment folder"
        )),
        (None, Some(m), Some(total), _) => refuse(format!(
            "records budget.evaluations = {total}; --minutes {m} counts wall time, which cannot be compared with it: give --budget {total} or more to go on, or use a new --experiment folder"
        )),
        (evaluations, minutes, ..) => {
            let grown = BudgetConfig {
                evaluations,
                minutes,
            };
            Ok((grown != *recorded).then_some(grown))
        }
    }
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
        pass: args.pass(),
        // A search's seeds are the named genomes of its pass: a backward genome
        // (genomes/fa2-bwd.toml) is no seed of a forward search, nor the reverse.
        seeds: genomes
            .iter()
            .filter(|(_, file)| file.genes.pass() == args.pass())
            .map(|(name, _)| name.clone())
            .collect(),
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
        model_data: match args.strategy.as_deref() {
            Some("guided") => Some(
                args.model_data
                    .clone()
                    .unwrap_or_else(|| crate::commands::cost_model::DEFAULT_MODEL_DATA.into()),
            ),
            _ => {
                if args.model_data.is_some() {
                    anyhow::bail!("--model-data is the guided strategy's; add --strategy guided");
                }
                None
            }
        },
    };
    // Round-trip through the checker so the command line gets the file's checks.
    let text = toml::to_string(&config)?;
    ExperimentConfig::from_toml_str(&text, Path::new(EXPERIMENT_FILE))
        .map_err(|e| match e {
            // Named by the option given, not by a line of a file nobody wrote.
            evo_mutator::ConfigError::Invalid { field, message, .. } => {
                anyhow::anyhow!("{}: {message}", option_of(&field))
            }
            other => anyhow::anyhow!("{other}"),
        })
        .context("the command-line options are inconsistent")
}

/// The `evo evolve` option that sets a field of `experiment.toml`.
fn option_of(field: &str) -> String {
    match field {
        "budget.evaluations" => "--budget".into(),
        "budget.minutes" => "--minutes".into(),
        "budget" => "--budget or --minutes".into(),
        "evolutionary.population" | "evolutionary.elites" => "--population".into(),
        "evolutionary.steady" => "--steady".into(),
        "evolutionary.in_flight" => "--in-flight".into(),
        "evolutionary.pipeline" => "--pipeline".into(),
        "problem" => "--problem".into(),
        "suite" => "--suite".into(),
        "backend" => "--backend".into(),
        "strategy" => "--strategy".into(),
        "pass" => "--pass".into(),
        "model_data" => "--model-data (with --strategy guided)".into(),
        f if f.starts_with("island") => "--island and its options".into(),
        f => format!("the option that sets `{f}`"),
    }
}
