//! `evo landscape`: measure every valid genome of a declared sub-space on the GPU.
//!
//! The result is what the replay backend searches on a machine without a GPU, and
//! what strategies are compared on (Kernel Tuner's simulation mode). Every
//! evaluation is appended to `evaluations.jsonl` and flushed as soon as it exists,
//! failures included, so a killed run resumes where it stopped and loses nothing.
//! Compiling the next chunk overlaps with the GPU evaluating the current one.
//!
//! `--out` is checked before the GPU starts: a folder that holds another plan's landscape,
//! or files that are no landscape, is refused; the folder is locked while measured.

use anyhow::{bail, Context};
use evo_gates::outcome::files::{this_process, write_atomic, FolderLock, LOCK_FILE};
use evo_gates::{Evaluation, GreenSuite, Status};
use evo_genome::{from_toml, Genome, GenomeId, Problem};
use evo_mutator::landscape::{read_evaluations, EVALUATIONS_FILE, EVALUATIONS_GZ_FILE, META_FILE};
use evo_mutator::{Evaluator, LandscapeMeta, SearchSpace, SubSpace};
use evo_worker::{GpuEvaluator, GpuPlan};
use serde::Deserialize;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct LandscapeArgs {
    /// The plan: the problem, GREEN's suite and the sub-space to measure (TOML).
    #[arg(long, value_name = "PLAN.toml")]
    pub plan: PathBuf,
    /// Output folder: landscape.toml and evaluations.jsonl (resumed if present).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Genomes compiled per chunk (the next chunk compiles while this one runs).
    #[arg(long, default_value_t = 96, value_parser = super::evolve::numbers::candidates)]
    pub chunk: usize,
    /// Run one worker per GPU: `all`, or ordinals such as `0,1` (one GPU model)
    /// [default: the first GPU].
    #[arg(long, value_name = "all|0,1,...")]
    pub gpus: Option<String>,
    /// Seconds a worker may spend on one genome before it is killed as hung.
    #[arg(long, default_value_t = 60, value_parser = super::evolve::numbers::timeout_seconds)]
    pub timeout: u64,
    /// Base seed of every GREEN and FAST input.
    #[arg(long, default_value_t = 2026, env = "EVO_SEED")]
    pub seed: u64,
    /// Measure at most this many genomes in this run (the rest on resume).
    #[arg(long, value_parser = super::evolve::numbers::evaluations)]
    pub limit: Option<usize>,
    /// Count the plan's points and valid genomes per family for this device (sm_89 or
    /// sm_90), and how many --out already holds; measures nothing, needs no GPU.
    #[arg(long, value_name = "sm_89|sm_90", value_parser = super::compile::parse_target)]
    pub count: Option<evo_genome::Target>,
}

/// What to measure: `problem`, `green` (suite name), `[subspace.base]`, `[subspace.genes]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    problem: Problem,
    green: String,
    subspace: SubSpace,
    #[serde(default)]
    notes: String,
}

fn load_plan(path: &Path) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(from_toml(&text, path)?)
}

/// Ids already measured in an earlier (killed) run, and the device they were measured on
/// (from `evaluations.jsonl`, or its gzipped copy).
fn measured(dir: &Path) -> anyhow::Result<(HashSet<GenomeId>, Option<String>)> {
    let mut ids = HashSet::new();
    let mut device = None;
    let Some((path, text)) = read_evaluations(dir)
        .with_context(|| format!("{}: cannot read the earlier measurements", dir.display()))?
    else {
        return Ok((ids, device));
    };
    let path = path.as_path();
    for (n, line) in text.lines().enumerate() {
        match serde_json::from_str::<Evaluation>(line) {
            Ok(e) => {
                device.get_or_insert(e.device.clone());
                ids.insert(e.genome_id);
            }
            // A line cut by a kill: it is measured again.
            Err(_) => eprintln!("{}:{}: unreadable line skipped", path.display(), n + 1),
        }
    }
    Ok((ids, device))
}

/// A landscape holds one plan's measurements: an --out that already holds one must hold
/// this plan's (then it is resumed), and one that holds files must hold a landscape.
fn check_out(args: &LandscapeArgs, plan: &Plan) -> anyhow::Result<()> {
    let out = &args.out;
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        bail!("--out {} is a file; choose a folder", out.display());
    }
    let meta_path = out.join(META_FILE);
    if meta_path.exists() {
        let text = std::fs::read_to_string(&meta_path)
            .with_context(|| format!("{}: cannot read", meta_path.display()))?;
        let recorded: LandscapeMeta = from_toml(&text, &meta_path)?;
        if recorded.problem != plan.problem {
            bail!(
                "{}: records problem {}, but the plan {} asks for {}; a landscape holds one plan's measurements: choose another --out",
                meta_path.display(),
                recorded.problem.spec(),
                args.plan.display(),
                plan.problem.spec()
            );
        }
        if recorded.subspace != plan.subspace {
            bail!(
                "{}: records another sub-space than the plan {}; a landscape holds one plan's measurements: choose another --out",
                meta_path.display(),
                args.plan.display()
            );
        }
        return Ok(());
    }
    let mut names: Vec<String> = std::fs::read_dir(out)
        .with_context(|| format!("{}: cannot list", out.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != LOCK_FILE)
        .collect();
    names.sort();
    // A run killed before its first landscape.toml left only its measurements; the plan
    // itself may wait in the folder it will fill.
    let plan_here = args
        .plan
        .canonicalize()
        .ok()
        .filter(|p| p.parent() == out.canonicalize().ok().as_deref())
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let measurements = [EVALUATIONS_FILE, EVALUATIONS_GZ_FILE];
    if names
        .iter()
        .all(|n| measurements.contains(&n.as_str()) || Some(n) == plan_here.as_ref())
    {
        return Ok(());
    }
    bail!(
        "--out {} holds {} but no {META_FILE}: it is not a landscape; choose a new --out",
        out.display(),
        names.join(", ")
    )
}

/// `--count`: the plan's size per family, without a GPU.
fn count(args: &LandscapeArgs, plan: &Plan, target: evo_genome::Target) -> anyhow::Result<()> {
    let space = SearchSpace::sub(&plan.subspace, plan.problem.head_dim, target)
        .with_context(|| format!("{}: the sub-space", args.plan.display()))?;
    let points = space.valid_points().with_context(|| {
        format!(
            "{}: the sub-space has {} points, more than can be enumerated; fix more genes",
            args.plan.display(),
            space.size()
        )
    })?;
    let (done, _) = measured(&args.out)?;
    let mut per_family = std::collections::BTreeMap::<String, (usize, usize)>::new();
    for g in points {
        let e = per_family.entry(g.family.to_string()).or_default();
        e.0 += 1;
        e.1 += usize::from(done.contains(&g.id()));
    }
    println!(
        "{}: {} points, {} valid on {} at D = {} ({}); {} of them recorded in {}",
        args.plan.display(),
        space.size(),
        points.len(),
        target,
        plan.problem.head_dim,
        per_family
            .iter()
            .map(|(f, (n, _))| format!("{f} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        per_family.values().map(|(_, d)| d).sum::<usize>(),
        args.out.display()
    );
    Ok(())
}

pub fn run(args: LandscapeArgs) -> anyhow::Result<()> {
    let plan = load_plan(&args.plan)?;
    plan.problem
        .validate()
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.plan.display()))?;
    if let Some(target) = args.count {
        return count(&args, &plan, target);
    }
    let suite = GreenSuite::parse(&plan.green).with_context(|| {
        format!(
            "{}: green = \"{}\" is not a suite; use \"quick\" or \"default\"",
            args.plan.display(),
            plan.green
        )
    })?;
    check_out(&args, &plan)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let _lock = FolderLock::acquire(&args.out, &this_process())?;
    // A landscape kept gzipped (as in the repository) is resumed in plain text: the new
    // measurements are appended to it line by line.
    let log_path = args.out.join(EVALUATIONS_FILE);
    let gz_path = args.out.join(EVALUATIONS_GZ_FILE);
    if !log_path.exists() && gz_path.exists() {
        let (_, text) = read_evaluations(&args.out)?.context("read just above")?;
        write_atomic(&log_path, text.as_bytes())
            .with_context(|| format!("{}: cannot write", log_path.display()))?;
        println!(
            "resuming from {}: decompressed to {} (gzip it again when the landscape is complete)",
            gz_path.display(),
            log_path.display()
        );
    }
    let gpus = args
        .gpus
        .as_deref()
        .map(evo_worker::parse_gpus)
        .transpose()?;
    let mut evaluator = GpuEvaluator::start_on(
        GpuPlan {
            green_cases: suite.cases(),
            full_gate: Vec::new(),
            objective: vec![plan.problem],
            seed: args.seed,
            timeout: Duration::from_secs(args.timeout),
            cubin_dir: std::env::temp_dir().join(format!("evo-cubins-{}", std::process::id())),
            // Each genome is measured once: nothing compiled here is compiled again.
            cubin_cache: None,
            compile_threads: None,
            plant: None,
        },
        gpus.as_deref(),
    )?;
    let target = evaluator.target();
    let space = SearchSpace::sub(&plan.subspace, plan.problem.head_dim, target)
        .with_context(|| format!("{}: the sub-space", args.plan.display()))?;
    let points: Vec<Genome> = space
        .valid_points()
        .with_context(|| {
            format!(
                "{}: the sub-space is too large to enumerate",
                args.plan.display()
            )
        })?
        .to_vec();

    let (done, recorded_on) = measured(&args.out)?;
    if let Some(other) = recorded_on.filter(|d| *d != evaluator.device()) {
        bail!(
            "{}: measured on `{other}`, this GPU is `{}`; a landscape holds one device's \
             timings: choose another --out",
            log_path.display(),
            evaluator.device()
        );
    }
    let mut todo: Vec<Genome> = points
        .iter()
        .filter(|g| !done.contains(&g.id()))
        .copied()
        .collect();
    if let Some(limit) = args.limit {
        todo.truncate(limit);
    }
    println!(
        "landscape: {} valid genomes in the sub-space ({} points), {} recorded before, {} to \
         measure now; {}",
        points.len(),
        space.size(),
        done.len(),
        todo.len(),
        evaluator.describe()
    );

    let meta = LandscapeMeta {
        device: evaluator.device(),
        date: super::evolve::today(),
        problem: plan.problem,
        template_hash: evaluator.template_hash(),
        toolchain: evaluator.toolchain(),
        target,
        subspace: plan.subspace.clone(),
        notes: format!(
            "{}GREEN suite `{}` ({} cases) before FAST; seed {}; recorded by `evo landscape \
             --plan {} --out {}`",
            if plan.notes.is_empty() {
                String::new()
            } else {
                format!("{} ", plan.notes.trim())
            },
            plan.green,
            suite.cases().len(),
            args.seed,
            args.plan.display(),
            args.out.display()
        ),
    };
    let meta_text = toml::to_string(&meta).context("landscape.toml does not serialize")?;
    write_atomic(&args.out.join(META_FILE), meta_text.as_bytes())
        .with_context(|| format!("{}: cannot write", args.out.join(META_FILE).display()))?;

    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("{}: cannot open", log_path.display()))?;
    // Invalid points are part of the landscape too: recorded with the rule that excludes them.
    let device = evaluator.device();
    for g in space
        .points()
        .filter(|g| !space.is_valid(g) && !done.contains(&g.id()))
    {
        let why = g
            .violations(plan.problem.head_dim, target)
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        let eval = Evaluation::failed(g, &device, Status::Invalid, why);
        writeln!(log, "{}", serde_json::to_string(&eval)?)?;
    }
    log.flush()?;
    let start = Instant::now();
    let mut counts = std::collections::BTreeMap::<Status, usize>::new();
    let mut best: Option<Evaluation> = None;
    let chunks: Vec<&[Genome]> = todo.chunks(args.chunk.max(1)).collect();
    let GpuEvaluator {
        compiler, runner, ..
    } = &mut evaluator;
    let compiler: &evo_worker::BatchCompiler = compiler;
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        scope.spawn(move || {
            for chunk in chunks {
                if tx.send(compiler.compile_batch(chunk)).is_err() {
                    break;
                }
            }
        });
        let mut n = 0usize;
        for prepared in rx {
            let mut write_error = None;
            runner.run_prepared(prepared, &mut |eval| {
                let line = serde_json::to_string(eval).expect("evaluations serialize");
                if let Err(e) = writeln!(log, "{line}").and_then(|_| log.flush()) {
                    write_error.get_or_insert(e);
                }
                n += 1;
                *counts.entry(eval.status).or_default() += 1;
                if eval.is_ok()
                    && best
                        .as_ref()
                        .is_none_or(|b: &Evaluation| eval.score_us < b.score_us)
                {
                    best = Some(eval.clone());
                }
            });
            if let Some(e) = write_error {
                bail!("{}: cannot append: {e}", log_path.display());
            }
            let rate = n as f64 / start.elapsed().as_secs_f64().max(1e-9);
            eprintln!(
                "  {n}/{} measured ({rate:.1}/s); {}; best {}",
                todo.len(),
                counts
                    .iter()
                    .map(|(s, c)| format!("{s} {c}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                best.as_ref()
                    .and_then(|b| b.score_us)
                    .map_or("-".into(), |us| format!("{us:.2} µs"))
            );
        }
        Ok(())
    })?;
    println!(
        "measured {} genomes in {:.0} s on {}; written to {}",
        todo.len(),
        start.elapsed().as_secs_f64(),
        evaluator.device(),
        log_path.display()
    );
    for line in evaluator.utilization() {
        println!("  {line}");
    }
    if let Some(b) = best {
        println!(
            "fastest: {} {:.2} µs  {}",
            b.genome_id,
            b.score_us.unwrap_or(f64::NAN),
            b.genome.summary()
        );
    }
    Ok(())
}
