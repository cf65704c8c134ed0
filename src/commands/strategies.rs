//! `evo strategies`: evolutionary vs random on a recorded landscape, over many seeds;
//! with `--steady`, the steady-state search beside them; with `--guided`, the search
//! guided by a cost model trained without the landscape's shape.

use crate::commands::evolve::{numbers, DEFAULT_LANDSCAPE};
use anyhow::{bail, Context};
use evo_genome::Problem;
use evo_lineage::write_atomic;
use evo_mutator::{compare_strategies, Contender, EvolutionParams, Landscape, StrategyKind};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct StrategiesArgs {
    /// A landscape folder (landscape.toml + evaluations.jsonl) recorded by `evo landscape`.
    #[arg(long, default_value = DEFAULT_LANDSCAPE)]
    pub landscape: PathBuf,
    /// Runs per strategy (seeds 0..N).
    #[arg(long, default_value_t = 50, value_parser = seeds)]
    pub seeds: u64,
    /// Evaluation counts at which the best-so-far is compared to the optimum.
    #[arg(long, value_delimiter = ',', default_value = "25,50,100,200", value_parser = numbers::evaluations)]
    pub checkpoints: Vec<usize>,
    /// Candidates per generation of the evolutionary strategy.
    #[arg(long, default_value_t = 16, value_parser = numbers::candidates)]
    pub population: usize,
    /// Run the evolutionary strategy with pipelined generations (`evo evolve
    /// --pipeline`): each generation bred from the results one generation back.
    #[arg(long)]
    pub pipeline: bool,
    /// Add the steady-state search (`evo evolve --steady`), one row per `--in-flight`
    /// count. Replay answers in the order submitted, as GPUs that finish in turn would.
    #[arg(long)]
    pub steady: bool,
    /// Candidates the steady-state search keeps in flight, one row each: 1 is the
    /// sequential steady-state search; a GPU run keeps 3 per GPU plus the compiles that
    /// feed them (21 on 2 GPUs with 32 cores, at the seed shape).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,21",
        requires = "steady",
        value_parser = numbers::candidates
    )]
    pub in_flight: Vec<usize>,
    /// Add the guided search (`evo evolve --strategy guided`): the evolutionary breeding
    /// with a cost model ranking the candidates. The model is trained on the records
    /// under --model-data, never on the landscape's own shape, wherever it was recorded.
    #[arg(long)]
    pub guided: bool,
    /// The recorded evaluations the cost model learns from.
    #[arg(long, value_name = "DIR", default_value = super::cost_model::DEFAULT_MODEL_DATA)]
    pub model_data: PathBuf,
    /// Shapes the model must not learn from besides the landscape's own (repeatable),
    /// e.g. the landscape's shape with the causal mask, for a stricter test.
    #[arg(long, value_name = "SPEC", requires = "guided")]
    pub leave_out: Vec<String>,
    /// Also write the result as JSON (a new file, or one replaced with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Replace the --json file when it exists.
    #[arg(long, requires = "json")]
    pub force: bool,
}

/// The most runs per strategy: each is a whole search.
const MAX_SEEDS: u64 = 100_000;

/// `--seeds`: at least one run, or there is no median to print.
fn seeds(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (1..=MAX_SEEDS).contains(&n) => Ok(n),
        _ => Err(format!("give a whole number of runs from 1 to {MAX_SEEDS}")),
    }
}

pub fn run(args: StrategiesArgs) -> anyhow::Result<()> {
    // Checked before the runs, which take minutes: a refused file then costs nothing.
    if let Some(path) = &args.json {
        super::check_new_file(path, args.force, "--json")?;
    }
    let landscape = Landscape::load(&args.landscape)?;
    println!("{}", landscape.banner());
    for w in &landscape.warnings {
        eprintln!("warning: {w}");
    }
    let mut params = EvolutionParams {
        population: args.population,
        pipeline: args.pipeline,
        ..EvolutionParams::default()
    };
    if args.pipeline {
        println!("evolutionary: pipelined generations (bred from the results one generation back)");
    }
    params.elites = params.elites.min(args.population.saturating_sub(1));
    if let Err((field, message)) = params.check() {
        bail!("--{field}: {message}");
    }
    // The steady-state parameters of each --in-flight count (none without --steady).
    let mut steady = Vec::new();
    for &n in args.in_flight.iter().filter(|_| args.steady) {
        let p = EvolutionParams {
            steady: true,
            pipeline: false,
            in_flight: Some(n),
            ..params.clone()
        };
        if let Err((field, message)) = p.check() {
            bail!("--{}: {message}", field.replace('_', "-"));
        }
        steady.push((n, p));
    }
    let mut contenders = vec![Contender::new(StrategyKind::Evolutionary, &params)];
    for (n, p) in &steady {
        contenders.push(Contender {
            label: format!("evolutionary, steady-state ({n} in flight)"),
            ..Contender::new(StrategyKind::Evolutionary, p)
        });
    }
    if args.guided {
        let leave_out = args
            .leave_out
            .iter()
            .map(|s| {
                s.parse::<Problem>()
                    .map_err(|e| anyhow::anyhow!("--leave-out {s}: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let model = super::cost_model::train(
            &args.model_data,
            &landscape.meta.device,
            landscape.space().pass(),
            landscape.meta.problem,
            &leave_out,
        )?;
        println!("cost model: {}", model.0.describe());
        contenders.push(Contender {
            model: Some(model.clone()),
            ..Contender::new(StrategyKind::Guided, &params)
        });
        for (n, p) in &steady {
            contenders.push(Contender {
                label: format!("guided, steady-state ({n} in flight)"),
                model: Some(model.clone()),
                ..Contender::new(StrategyKind::Guided, p)
            });
        }
    }
    contenders.push(Contender::new(StrategyKind::Random, &params));
    let Some(comparison) =
        compare_strategies(&landscape, &contenders, args.seeds, &args.checkpoints)?
    else {
        bail!(
            "no genome in the landscape at {} passed GREEN; there is no optimum to compare against",
            args.landscape.display()
        );
    };
    print!("{}", comparison.to_markdown());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&comparison)?;
        write_atomic(path, (text + "\n").as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
