//! `evo tune`: the champions of a model's shapes, searched, collected and benched in
//! one command.
//!
//! ```text
//! OUT/                      experiments/<date>-tune-<model or "shapes"> by default
//!   tune.toml               the plan: shapes in order, budget, strategy, GPUs, backend
//!   searches/<shape>/       one `evo evolve` experiment per shape
//!   searches/<shape>.seeds/ its seed genomes (champions near the shape, named genomes)
//!   searches/<shape>.log    its output
//!   champions/              `evo champions` of the searches: dispatch.toml + genomes
//!   bench.json              `evo bench --champions champions --record --cold-l2`
//!   tune.md                 the table: shape, evaluations, champion, best SDPA, speedup
//! ```
//! Each search is a child process (`evo evolve`), one per GPU at a time; a rerun with
//! the same `--out` resumes the tune (see [`plan`]). Without a GPU, `--backend auto`
//! replays the recorded landscape, which answers only its own shape.

use super::evolve::numbers;
use anyhow::{bail, Context};
use evo_gates::outcome::files::{this_process, FolderLock};
use evo_genome::dispatch::ShapeClass;
use evo_genome::{from_toml, Dtype, Problem};
use evo_mutator::{Backend, BudgetConfig, LandscapeMeta, StrategyKind};
use std::path::{Path, PathBuf};

mod models;
mod plan;
mod run;
mod seeds;
mod shapes;
mod table;

use plan::{Asked, Defaults, Plan, PLAN_FILE};
use run::{ChildOptions, Ended, Job};

/// The strategy every search runs unless `--strategy` says otherwise: the model-ranked
/// one, which spends a GPU's minutes on the candidates a cost model expects to be fast.
pub const TUNE_STRATEGY: &str = "guided";

/// What the tune says of a search that ended with no candidate through the gates.
pub(crate) const NO_CHAMPION: &str = "no candidate passed the gates";

/// A finished search's champion as its progress line says it, or [`NO_CHAMPION`].
fn champion_text(us: Option<f64>) -> String {
    us.map_or(NO_CHAMPION.into(), |u| format!("champion {u:.2} µs"))
}

/// Evaluations per shape when neither --budget nor --minutes is given (evolve's default).
const DEFAULT_EVALUATIONS: usize = 200;

#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// A model preset: its prefill and decode shapes (`--list-models` shows them).
    #[arg(long, conflicts_with_all = ["problems", "problems_file"])]
    pub model: Option<String>,
    /// A shape to tune, `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]`
    /// (repeatable).
    #[arg(
        long = "problem",
        value_name = "SPEC",
        conflicts_with = "problems_file"
    )]
    pub problems: Vec<String>,
    /// A file of shapes: one spec a line, `#` starts a comment.
    #[arg(long = "problems", value_name = "FILE")]
    pub problems_file: Option<PathBuf>,
    /// List the model presets, their shapes and the config each comes from.
    #[arg(long)]
    pub list_models: bool,
    /// The preset's prefill lengths (batch 1, causal), or `none` [default: 2048,8192,32768].
    #[arg(long, value_name = "L,L,...|none", requires = "model")]
    pub prefill: Option<String>,
    /// The preset's decode points, one query against a KV cache, or `none`
    /// [default: 1x4096,16x8192,64x32768,1x131072].
    #[arg(long, value_name = "BxCONTEXT,...|none", requires = "model")]
    pub decode: Option<String>,
    /// The preset's dtype [default: f16]; a spec states its own.
    #[arg(long, value_parser = ["f16", "bf16"])]
    pub dtype: Option<String>,
    /// Evaluations per shape [default: 200].
    #[arg(long, conflicts_with = "minutes", value_parser = numbers::evaluations)]
    pub budget: Option<usize>,
    /// Minutes of wall time per shape instead.
    #[arg(long, value_parser = numbers::minutes)]
    pub minutes: Option<f64>,
    /// The tune's folder: new or empty, or a tune to resume [default:
    /// experiments/<date>-tune-<model or "shapes">].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Search on these GPUs, one shape per GPU at a time: `all`, or ordinals such as
    /// `0,1` [default: one shape at a time on the first GPU].
    #[arg(long, value_name = "all|0,1,...")]
    pub gpus: Option<String>,
    /// auto (GPU if present, else replay of the recorded landscape), gpu, or replay:DIR
    /// [default: auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// The searches' strategy (`evo evolve --strategy`) [default: guided].
    #[arg(long)]
    pub strategy: Option<String>,
    /// The champions folder whose dispatch table seeds each search with the champions
    /// nearest its shape [default: genomes/champions/h100].
    #[arg(long = "from", value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// The named genomes that also seed every search [default: genomes].
    #[arg(long)]
    pub genomes: Option<PathBuf>,
    /// The recorded evaluations the guided strategy's cost model learns from (each
    /// search leaves its own shape out): a folder or one file, kept in tune.toml for a
    /// resume [default: experiments].
    #[arg(long, value_name = "DIR")]
    pub model_data: Option<PathBuf>,
    /// Seeds every search from N and its shape, so that the same tune run again (or on
    /// other GPUs) runs the same searches [default: a fresh seed for each search].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    pub seed: Option<u64>,
    /// Do not bench the champions against PyTorch SDPA after the searches.
    #[arg(long)]
    pub no_bench: bool,
}

/// The name of a shape's search folder: its class name and its dtype.
pub(crate) fn search_name(p: &Problem) -> String {
    format!("{}-{}", ShapeClass::name_of(p), p.dtype)
}

/// The recorded landscape the searches replay, if they replay: `replay:DIR`, or `auto`
/// on a machine without a CUDA device.
fn replayed_landscape(backend: &str) -> anyhow::Result<Option<PathBuf>> {
    match Backend::parse(backend) {
        None => bail!("--backend {backend}: use auto, gpu or replay:DIR"),
        Some(Backend::Replay(dir)) => Ok(Some(dir)),
        Some(_) if super::evolve::on_gpu(Some(backend)) => Ok(None),
        Some(Backend::Auto) => Ok(Some(PathBuf::from(super::evolve::DEFAULT_LANDSCAPE))),
        Some(_) => Ok(None),
    }
}

/// A replayed tune answers only the landscape's shape: any other is refused up front,
/// before a search starts. Returns the line that says the numbers are replayed.
fn check_replay(dir: &Path, shapes: &[Problem], plan: &Plan) -> anyhow::Result<String> {
    if plan.gpus.is_some() {
        bail!("--gpus chooses the GPUs of the searches; replay runs on none (drop --gpus, or use --backend gpu)");
    }
    let path = dir.join(evo_mutator::landscape::META_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: no recorded landscape to replay (no CUDA device here); run on a GPU, or pass --backend replay:DIR",
            path.display()
        )
    })?;
    let meta: LandscapeMeta = from_toml(&text, &path)?;
    if let Some(p) = shapes.iter().find(|p| **p != meta.problem) {
        bail!(
            "{p} ({}): no CUDA device here, and the recorded landscape at {} answers only {} ({}); tuning {p} needs a GPU: run this on a machine with one (--backend gpu)",
            p.spec(),
            dir.display(),
            meta.problem,
            meta.problem.spec()
        );
    }
    Ok(format!(
        "replaying the landscape recorded on {} on {} ({}): every µs below is that recording's, not a measurement of this machine",
        meta.device,
        meta.date,
        dir.display()
    ))
}

/// `1 shape`, `7 shapes`.
pub(crate) fn shape_count(n: usize) -> String {
    format!("{n} shape{}", if n == 1 { "" } else { "s" })
}

fn list_models(dtype: Dtype) {
    for p in &models::PRESETS {
        print!("{}", p.describe(dtype));
    }
    println!(
        "prefill: batch 1, causal, at {} keys; decode: one query against the cache (causal, bottom-right), batch x context {}",
        models::DEFAULT_PREFILL.map(|l| l.to_string()).join(", "),
        models::DEFAULT_DECODE
            .map(|(b, l)| format!("{b}x{l}"))
            .join(", ")
    );
}

pub fn run(args: TuneArgs) -> anyhow::Result<()> {
    if args.list_models {
        list_models(match args.dtype.as_deref() {
            Some("bf16") => Dtype::Bf16,
            _ => Dtype::F16,
        });
        return Ok(());
    }
    let shapes = shapes::asked(&args)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let what = args
            .model
            .as_deref()
            .map_or("shapes".to_string(), super::evolve::slug);
        PathBuf::from("experiments").join(format!("{}-tune-{what}", super::evolve::today()))
    });
    let asked = Asked {
        model: args.model.clone(),
        shapes,
        strategy: args.strategy.clone(),
        backend: args.backend.clone(),
        gpus: args.gpus.clone(),
        seeds_from: args.from.clone(),
        genomes: args.genomes.clone(),
        seed: args.seed,
        model_data: args.model_data.clone(),
        budget: (args.budget.is_some() || args.minutes.is_some()).then_some(BudgetConfig {
            evaluations: args.budget,
            minutes: args.minutes,
        }),
    };
    // A tune on record is locked before its plan is read: two tunes of one folder would
    // run the same searches.
    let mut lock = if out.join(PLAN_FILE).is_file() {
        Some(FolderLock::acquire(&out, &this_process())?)
    } else {
        None
    };
    let defaults = Defaults {
        strategy: TUNE_STRATEGY,
        seeds_from: super::champions::DEFAULT_CHAMPIONS,
        genomes: "genomes",
        evaluations: DEFAULT_EVALUATIONS,
    };
    let (plan, resumed) = plan::open(&out, &asked, &defaults)?;
    if StrategyKind::parse(&plan.strategy).is_none() {
        bail!(
            "--strategy {}: `evo evolve` has no such strategy (it knows {}); pass --strategy evolutionary",
            plan.strategy,
            StrategyKind::ALL.map(|k| k.name()).join(", ")
        );
    }
    let problems = plan.problems();
    let replay = replayed_landscape(&plan.backend)?;
    let first_line = match &replay {
        Some(dir) => check_replay(dir, &problems, &plan)?,
        None => format!(
            "tuning {} on {}",
            shape_count(problems.len()),
            plan.gpus
                .as_deref()
                .map_or("the first GPU".into(), |g| format!("GPUs {g}"))
        ),
    };
    let slots: Vec<Option<u32>> = match &plan.gpus {
        Some(spec) => evo_worker::parse_gpus(spec)?
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None],
    };
    println!("{first_line}");

    std::fs::create_dir_all(out.join("searches"))
        .with_context(|| format!("{}: cannot create", out.display()))?;
    if lock.is_none() {
        lock = Some(FolderLock::acquire(&out, &this_process())?);
    }
    if !resumed {
        plan.save(&out.join(PLAN_FILE))?;
    }
    println!(
        "{} {} ({}, {} each, strategy {}, backend {}); logs in {}",
        if resumed { "resuming" } else { "planned" },
        out.join(PLAN_FILE).display(),
        shape_count(problems.len()),
        plan.budget_label(),
        plan.strategy,
        plan.backend,
        out.join("searches").display()
    );

    let n = problems.len();
    let mut seeds = None;
    let mut jobs = Vec::new();
    for (index, (p, shape)) in problems.iter().zip(&plan.shapes).enumerate() {
        let experiment = out.join(&shape.search);
        if run::is_done(&experiment) {
            let (evaluations, us) = run::summary(&experiment);
            println!(
                "[{}/{n}] {p}: searched before ({} evaluations, {}), skipped",
                index + 1,
                evaluations.map_or("?".into(), |e| e.to_string()),
                champion_text(us)
            );
            continue;
        }
        let folder = experiment.with_extension("seeds");
        if !folder.is_dir() {
            if seeds.is_none() {
                seeds = Some(seeds::SeedSource::open(&plan.seeds_from, &plan.genomes)?);
            }
            seeds.as_ref().expect("opened above").write(p, &folder)?;
        }
        jobs.push(Job {
            index,
            problem: *p,
            log: experiment.with_extension("log"),
            experiment,
            seeds: folder,
        });
    }
    let exe = std::env::current_exe().context("cannot find this evo binary")?;
    let model_data = (plan.strategy == "guided").then(|| {
        plan.model_data
            .clone()
            .unwrap_or_else(|| super::cost_model::DEFAULT_MODEL_DATA.into())
    });
    if let Some(d) = model_data.as_ref().filter(|d| !d.exists()) {
        bail!(
            "--model-data {}: no such folder or file; the guided strategy's cost model learns from recorded evaluations (run from evo's repository, whose experiments/ holds them, name a folder of `evo evolve` records, or pass --strategy evolutionary)",
            d.display()
        );
    }
    let options = ChildOptions {
        strategy: plan.strategy.clone(),
        backend: plan.backend.clone(),
        budget: plan.budget_args(),
        model_data,
        seed: plan.seed,
        cores: run::core_share(slots.len()),
    };
    if slots.len() > 1 {
        run::costliest_first(&mut jobs);
    }
    let searched_now = !jobs.is_empty();
    let finished = run::run_all(&exe, jobs, &slots, &options, |f| {
        let label = format!("[{}/{n}] {}", f.job.index + 1, f.job.problem);
        match &f.ended {
            Ended::Done => {
                let (evaluations, us) = run::summary(&f.job.experiment);
                println!(
                    "{label}: {} evaluations in {:.1} s{}, {} ({})",
                    evaluations.map_or("?".into(), |e| e.to_string()),
                    f.wall.as_secs_f64(),
                    f.gpu.map_or(String::new(), |g| format!(" on GPU {g}")),
                    champion_text(us),
                    f.job.experiment.display()
                );
            }
            Ended::Failed(why) => println!("{label}: FAILED: {why}"),
        }
    });
    let failed: Vec<&run::Finished> = finished
        .iter()
        .filter(|f| matches!(f.ended, Ended::Failed(_)))
        .collect();

    let done: Vec<PathBuf> = plan
        .shapes
        .iter()
        .map(|s| out.join(&s.search))
        .filter(|e| run::is_done(e))
        .collect();
    // A search that ended with no candidate through the gates has no champion; the
    // others' champions and bench do not wait for it.
    let (crowned, empty): (Vec<PathBuf>, Vec<PathBuf>) = done
        .iter()
        .cloned()
        .partition(|e| run::summary(e).1.is_some());
    let champions_dir = out.join(table::CHAMPIONS_DIR);
    let mut step_errors = Vec::new();
    let dispatch = champions_dir.join(evo_genome::dispatch::DISPATCH_FILE);
    if !crowned.is_empty() && (searched_now || !dispatch.exists()) {
        match table::champions(&exe, &out, &crowned) {
            Ok(()) => println!("champions: {}", dispatch.display()),
            Err(e) => step_errors.push(format!("{e:#}")),
        }
    }
    if !crowned.is_empty() && dispatch.exists() {
        if replay.is_some() {
            println!(
                "bench skipped: the numbers are replayed; time the champions on a GPU with `evo bench --champions {} --record --cold-l2`",
                champions_dir.display()
            );
        } else if args.no_bench {
            println!("bench skipped (--no-bench)");
        } else if table::needs_bench(&out) {
            let dtype = problems.first().map_or(Dtype::F16, |p| p.dtype);
            if problems.iter().any(|p| p.dtype != dtype) {
                eprintln!(
                    "note: the bench times every champion in {dtype}, the first shape's dtype"
                );
            }
            match table::bench(&exe, &out, dtype.label()) {
                Ok(()) => println!("bench: {}", out.join(table::BENCH_JSON).display()),
                Err(e) => step_errors.push(format!("{e:#}")),
            }
        }
    }

    let text = table::write_report(&out, &plan, &problems, replay.is_some(), &done)?;
    println!();
    print!("{text}");
    drop(lock);

    for e in &empty {
        step_errors.push(format!(
            "{}: {NO_CHAMPION} (its log says why: {}); give that search more time with `evo evolve --experiment {} --minutes M` or `--budget N` (above its recorded budget), then rerun this tune",
            e.display(),
            e.with_extension("log").display(),
            e.display()
        ));
    }
    if !failed.is_empty() || !step_errors.is_empty() {
        for e in &step_errors {
            eprintln!("{e}");
        }
        bail!(
            "{} of {} failed{}; see their logs, and rerun the same command to resume",
            failed.len(),
            shape_count(n),
            if step_errors.is_empty() {
                String::new()
            } else {
                format!(
                    ", and {} step(s) after the searches failed",
                    step_errors.len()
                )
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_folder_is_named_by_class_and_dtype() {
        let p: Problem = "16,32,1,8192,128,bf16,causal=br,kv=8".parse().unwrap();
        assert_eq!(search_name(&p), "b16-h32kv8-lq1-lk8192-d128-causal-br-bf16");
    }
}
