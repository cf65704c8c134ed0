//! `evo replay`: re-measure an experiment's lineage on the GPU at hand.
//!
//! Every node recorded on one device (the seeds' L4, an earlier H100 run) is compiled
//! and gated again here, and the two figures are printed side by side: does the
//! ordering the search found still hold on this GPU? The new evaluations are
//! appended to `replays.jsonl` in the experiment folder, so nothing measured is lost;
//! the folder is locked meanwhile, as a search writing it would lock it.

use anyhow::Context;
use evo_gates::outcome::files::{this_process, FolderLock};
use evo_gates::GreenSuite;
use evo_genome::Problem;
use evo_lineage::Lineage;
use evo_mutator::{Evaluator, ExperimentConfig, EXPERIMENT_FILE};
use evo_worker::{GpuEvaluator, GpuPlan};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The experiment folder (holds lineage.json; experiment.toml names the problem).
    pub experiment: PathBuf,
    /// Re-measure every node, not only the path from the root to the champion.
    #[arg(long)]
    pub all: bool,
    /// GREEN's suite for the re-measurement.
    #[arg(long, default_value = "quick", value_parser = ["quick", "default"])]
    pub suite: String,
    /// Seconds a worker may spend on one genome.
    #[arg(long, default_value_t = 60, value_parser = super::evolve::numbers::timeout_seconds)]
    pub timeout: u64,
    /// Base seed of every input.
    #[arg(long, default_value_t = 2026, env = "EVO_SEED")]
    pub seed: u64,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let lineage_path = args.experiment.join("lineage.json");
    let lineage = Lineage::load(&lineage_path)?;
    let config_path = args.experiment.join(EXPERIMENT_FILE);
    let problem = if config_path.exists() {
        ExperimentConfig::load(&config_path)?
            .problem
            .unwrap_or_else(Problem::seed)
    } else {
        Problem::seed()
    };
    let nodes: Vec<_> = if args.all {
        lineage.nodes().collect()
    } else {
        lineage.champion_path()
    };
    anyhow::ensure!(
        !nodes.is_empty(),
        "{}: the lineage has no node to replay",
        lineage_path.display()
    );
    let _lock = FolderLock::acquire(&args.experiment, &this_process())?;
    let mut evaluator = GpuEvaluator::start(GpuPlan {
        green_cases: GreenSuite::parse(&args.suite)
            .expect("clap checked the suite")
            .cases(),
        objective: vec![problem],
        full_gate: Vec::new(),
        seed: args.seed,
        timeout: Duration::from_secs(args.timeout),
        cubin_dir: std::env::temp_dir().join(format!("evo-cubins-{}", std::process::id())),
        // A re-measurement compiles a lineage's few nodes once.
        cubin_cache: None,
        compile_threads: None,
        plant: None,
    })?;
    println!(
        "replaying {} node(s) of {} (recorded on {}) on {}; objective {problem}",
        nodes.len(),
        lineage_path.display(),
        lineage.meta.device,
        evaluator.device()
    );
    let genomes: Vec<_> = nodes.iter().map(|n| n.genome).collect();
    let log_path = args.experiment.join("replays.jsonl");
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("{}: cannot open", log_path.display()))?;
    // Each measurement is on disk the moment it exists.
    let mut write_error = None;
    let now = evaluator
        .evaluate_each(&genomes, &mut |e| {
            let line = serde_json::to_string(e).expect("evaluations serialize");
            if let Err(err) = writeln!(log, "{line}").and_then(|_| log.flush()) {
                write_error.get_or_insert(err);
            }
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(err) = write_error {
        anyhow::bail!("{}: cannot append: {err}", log_path.display());
    }

    println!(
        "\n| node | then: device | then µs | now: device | now µs | now GREEN | now vs then |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut first_now: Option<f64> = None;
    for (node, eval) in nodes.iter().zip(&now) {
        let then_dev = node
            .evaluation
            .as_ref()
            .map_or("-".to_string(), |e| e.device.clone());
        let then_us = node.score_us();
        let now_us = eval.score_us;
        first_now = first_now.or(now_us);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            node.label(),
            then_dev,
            fmt_us(then_us),
            eval.device,
            fmt_us(now_us),
            eval.status,
            match (then_us, now_us) {
                (Some(t), Some(n)) => format!("{:.1}x faster", t / n),
                _ => "-".into(),
            }
        );
        if !eval.is_ok() && !eval.detail.is_empty() {
            println!("|   | {} |", eval.detail.lines().next().unwrap_or_default());
        }
    }
    println!(
        "\nnow-measurements appended to {} ({} records)",
        log_path.display(),
        now.len()
    );
    Ok(())
}

fn fmt_us(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| format!("{v:.2}"))
}
