//! `evo strategies`: evolutionary vs random on a recorded landscape, over many seeds;
//! with `--steady`, the steady-state search beside them.

use crate::commands::evolve::DEFAULT_LANDSCAPE;
use anyhow::{bail, Context};
use evo_mutator::{compare_strategies, Contender, EvolutionParams, Landscape, StrategyKind};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct StrategiesArgs {
    /// A landscape folder (landscape.toml + evaluations.jsonl) recorded by `evo landscape`.
    #[arg(long, default_value = DEFAULT_LANDSCAPE)]
    pub landscape: PathBuf,
    /// Runs per strategy (seeds 0..N).
    #[arg(long, default_value_t = 50)]
    pub seeds: u64,
    /// Evaluation counts at which the best-so-far is compared to the optimum.
    #[arg(long, value_delimiter = ',', default_value = "25,50,100,200")]
    pub checkpoints: Vec<usize>,
    /// Candidates per generation of the evolutionary strategy.
    #[arg(long, default_value_t = 16)]
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
        requires = "steady"
    )]
    pub in_flight: Vec<usize>,
    /// Also write the result as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(args: StrategiesArgs) -> anyhow::Result<()> {
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
    let mut contenders = vec![Contender::new(StrategyKind::Evolutionary, &params)];
    if args.steady {
        for &n in &args.in_flight {
            let steady = EvolutionParams {
                steady: true,
                pipeline: false,
                in_flight: Some(n),
                ..params.clone()
            };
            if let Err((field, message)) = steady.check() {
                bail!("--{}: {message}", field.replace('_', "-"));
            }
            contenders.push(Contender {
                label: format!("evolutionary, steady-state ({n} in flight)"),
                ..Contender::new(StrategyKind::Evolutionary, &steady)
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
        std::fs::write(path, text + "\n")
            .with_context(|| format!("{}: cannot write", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
