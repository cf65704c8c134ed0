//! `evo gate`: GREEN, then FAST for the kernels that pass, on genomes, sampled genomes
//! and hand-written `.cu` files.
//!
//! All compiles of the run happen first, in parallel; then the GPU part runs kernel
//! after kernel in one context. Exit status: 0 when every kernel passed GREEN, an
//! error naming the failures otherwise (after the table and the JSON are written).

use anyhow::{bail, Context};
use evo_codegen::Toolchain;
use evo_gates::compile::{
    compile_all, load_family, resources, sample_sources, variants_for, KernelSource,
};
use evo_gates::evaluate::time_and_recheck;
use evo_gates::green::{run_green_cached, GreenCache, GreenOptions, GreenReport};
use evo_gates::lse_twin::{compile_lse_twins, load_lse_twins};
use evo_gates::report::{green_table, Row};
use evo_gates::suite::{drawn_cases, load_suite, DRAWN_CASES};
use evo_gates::{AttentionKernel, Device, EvalOptions, FastOptions, GreenSuite, TimingSuite};
use evo_genome::{Dtype, Family, GenomeFile, Pass, Problem};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) mod backward;
mod shards;
mod sources;
pub use shards::Shard;
use shards::{parse_shard, positions, run_on_gpus};
pub use sources::load_sources;

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Genome files (genomes/*.toml).
    pub genomes: Vec<PathBuf>,
    /// Hand-written kernel files under kernels/ABI.md (repeatable).
    #[arg(long = "source", value_name = "FILE.cu")]
    pub sources: Vec<PathBuf>,
    /// Also gate N genomes drawn uniformly from the valid space (valid at D64 and D128;
    /// with a backward --family, at D128).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub sample: usize,
    /// Draw the --sample genomes from one kernel family only.
    #[arg(long, value_parser = ["ampere", "hopper", "ampere_bwd", "hopper_bwd"])]
    pub family: Option<String>,
    /// GREEN's fixed cases: `default`, `quick`, or a TOML file of your own `[[case]]`
    /// shapes. Shapes drawn from --seed are always added (see the report).
    #[arg(
        long,
        default_value = "default",
        value_name = "default|quick|FILE.toml"
    )]
    pub suite: String,
    /// Shapes GREEN draws from --seed in addition to the fixed cases (at least 6 for a
    /// real gate; 0 only for sanitizer runs, where every launch costs 100x).
    #[arg(long, default_value_t = DRAWN_CASES, value_name = "N")]
    pub drawn: usize,
    /// What FAST times after GREEN: the seed shape, the anchors or models suite, or nothing.
    #[arg(long, default_value = "seed", value_parser = ["seed", "anchors", "models", "none"])]
    pub time: String,
    /// Run seed: GREEN's inputs, its drawn shapes and the sample of genomes derive from
    /// it; printed and recorded in the JSON. [default: a fresh seed every run, so no
    /// kernel can be tuned to one draw; give it to reproduce a run]
    #[arg(long, env = "EVO_SEED")]
    pub seed: Option<u64>,
    /// Write one JSON object per kernel × case here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Longest one GREEN case or one FAST timing may take, in seconds. A kernel that
    /// hangs cannot be stopped inside this process: the gate then reports the kernel
    /// and the case, writes the JSON of what it measured so far, and exits with status 3.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub step_timeout: u64,
    /// Write each --sample genome to DIR/<name>.toml, so that one of them can be gated
    /// (or compiled, profiled) alone afterwards.
    #[arg(long, value_name = "DIR")]
    pub save_samples: Option<PathBuf>,
    /// Start at the K-th kernel of the list (counting from 1; genomes, then --source
    /// files, then samples): resumes a sweep that a hung kernel stopped, with the same
    /// arguments. The kernels before K are not compiled or run.
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub from: usize,
    /// Gate on these GPUs at once: `all`, or ordinals such as `0,1` (one GPU model). Each
    /// GPU runs its own `evo gate --shard` process over every N-th kernel; the rows come
    /// back merged, in list order, each naming its GPU. [default: the first GPU]
    #[arg(long, value_name = "all|0,1,...")]
    pub gpus: Option<String>,
    /// Run only the K-th of N equal parts of the list (kernels K, K+N, K+2N, ... from
    /// --from on): one of N gates splitting a sweep, on GPUs or hosts of their own.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    pub shard: Option<Shard>,
}

/// What the gate is doing now, for the watchdog.
struct Step {
    /// "[k/n]" of the progress lines.
    position: String,
    /// k.
    place: usize,
    kernel: String,
    genome_id: Option<String>,
    what: String,
    problem: Problem,
    since: Instant,
}

/// Ends the process, with a report and the JSON so far, when one step hangs.
fn watchdog(
    step: Arc<Mutex<Option<Step>>>,
    rows: Arc<Mutex<Vec<Row>>>,
    json: Option<PathBuf>,
    device: String,
    limit: Duration,
) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(500));
        let guard = step.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = guard.as_ref() else { continue };
        if s.since.elapsed() < limit {
            continue;
        }
        let reason = format!(
            "no result after {:.0} s on {} (--step-timeout): the kernel hung or is far too slow; \
             a hung kernel cannot be stopped inside this process, so the gate ends here",
            limit.as_secs_f64(),
            s.what
        );
        eprintln!("{} {}: TIMEOUT: {reason}", s.position, s.kernel);
        let mut all = rows.lock().unwrap_or_else(|e| e.into_inner()).clone();
        all.push(Row {
            position: Some(s.place),
            ..Row::not_run(
                &s.kernel,
                s.genome_id.as_deref(),
                &device,
                &s.problem,
                "timeout",
                reason,
            )
        });
        if let Some(path) = &json {
            if let Err(e) = write_rows(path, &all) {
                eprintln!("{e:#}");
            }
        }
        std::process::exit(3);
    });
}

/// The GREEN table on stdout (timing rows left out) and, if asked, all rows as JSON.
pub(super) fn report_rows(rows: &[Row], json: Option<&std::path::Path>) -> anyhow::Result<()> {
    let green_rows: Vec<Row> = rows
        .iter()
        .filter(|r| r.verdict != "timed")
        .cloned()
        .collect();
    print!("{}", green_table(&green_rows));
    if let Some(path) = json {
        write_rows(path, rows)?;
    }
    Ok(())
}

/// The gate's JSON: one object per kernel × case (and timing).
fn write_rows(path: &std::path::Path, rows: &[Row]) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(rows)?)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    eprintln!("wrote {} rows to {}", rows.len(), path.display());
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn enter(
    step: &Mutex<Option<Step>>,
    position: &str,
    place: usize,
    kernel: &str,
    id: Option<&str>,
    what: String,
    problem: Problem,
) {
    *step.lock().unwrap_or_else(|e| e.into_inner()) = Some(Step {
        position: position.to_string(),
        place,
        kernel: kernel.to_string(),
        genome_id: id.map(str::to_string),
        what,
        problem,
        since: Instant::now(),
    });
}

pub fn run(mut args: GateArgs) -> anyhow::Result<()> {
    let seed = *args.seed.get_or_insert_with(fresh_seed);
    let gpus = args
        .gpus
        .as_deref()
        .map(evo_worker::parse_gpus)
        .transpose()?;
    if let Some(gpus) = gpus.as_deref().filter(|g| g.len() > 1) {
        if args.shard.is_some() {
            bail!("--gpus runs one --shard per GPU itself; give one of the two");
        }
        return run_on_gpus(&args, seed, gpus);
    }
    let ordinal = gpus.as_deref().map_or(0, |g| g[0]) as usize;
    let mut sources = load_sources(&args.genomes, &args.sources)?;
    if sources.is_empty() && args.sample == 0 {
        bail!("nothing to gate: name genome files, --source FILE.cu, or --sample N");
    }
    // A list that mixes the passes is refused before the GPU is opened.
    backward::pass_of(&sources)?;
    // The suite is read before the GPU is opened: a typo is an error on any machine.
    let fixed = match GreenSuite::parse(&args.suite) {
        Some(suite) => suite.cases(),
        None if args.suite.ends_with(".toml") => load_suite(std::path::Path::new(&args.suite))?,
        None => bail!(
            "--suite {}: not a suite; use `default`, `quick` or a TOML file of [[case]] shapes",
            args.suite
        ),
    };
    let device = Device::open(ordinal)?;
    let target = super::device_target(&device)?;
    let tc = Toolchain::discover()?;
    evo_gates::compile::install_verifier(&tc, &device)?;
    let family = args.family.as_deref().map(|f| match f {
        "hopper" => Family::Hopper,
        "ampere_bwd" => Family::AmpereBwd,
        "hopper_bwd" => Family::HopperBwd,
        _ => Family::Ampere,
    });
    let sampled = sample_sources(args.sample, seed, target, family);
    if sampled.len() < args.sample {
        bail!(
            "--family {} has no genome valid at D64 and D128 on {target}",
            args.family.as_deref().unwrap_or("")
        );
    }
    if let Some(dir) = &args.save_samples {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        for s in &sampled {
            if let KernelSource::Genome { name, genome } = s {
                let file = GenomeFile {
                    name: name.clone(),
                    description: String::new(),
                    genes: *genome,
                };
                file.save(
                    &dir.join(format!("{name}.toml")),
                    &format!(
                        "drawn by `evo gate --sample {} --seed {}{}` on {target}",
                        args.sample,
                        seed,
                        args.family
                            .as_deref()
                            .map(|f| format!(" --family {f}"))
                            .unwrap_or_default()
                    ),
                )?;
            }
        }
        eprintln!(
            "wrote the {} sampled genomes to {}",
            sampled.len(),
            dir.display()
        );
    }
    sources.extend(sampled);
    let total = sources.len();
    if args.from < 1 || args.from > total {
        bail!("--from {}: the list has kernels 1 to {total}", args.from);
    }
    let places = positions(total, args.from, args.shard);
    let sources: Vec<KernelSource> = places.iter().map(|&p| sources[p - 1].clone()).collect();
    if let Some(s) = args.shard {
        eprintln!(
            "shard {}/{}: {} of the {} kernels from {} on",
            s.k,
            s.n,
            sources.len(),
            total + 1 - args.from,
            args.from
        );
    }
    let mut cases = fixed;
    if args.drawn > 0 {
        cases.extend(drawn_cases(seed, args.drawn));
    }
    let drawn = cases.iter().filter(|c| c.drawn).count();
    eprintln!(
        "GREEN: {} fixed cases and {drawn} shapes drawn from seed {} (reproduce with --seed {}){}",
        cases.len() - drawn,
        seed,
        seed,
        if drawn > 0 { ":" } else { "" }
    );
    for c in cases.iter().filter(|c| c.drawn) {
        eprintln!("  {}", c.label());
    }
    let timed: Vec<Problem> = match args.time.as_str() {
        "none" => Vec::new(),
        name => TimingSuite::parse(name)
            .expect("clap checked")
            .problems(Dtype::F16),
    };
    if backward::pass_of(&sources)? == Pass::Backward {
        return backward::run(
            backward::BackwardRun {
                device: &device,
                tc: &tc,
                target,
                seed,
                cases,
                timed,
                json: args.json.as_deref(),
            },
            &sources,
        );
    }
    let mut all_problems: Vec<Problem> = cases.iter().map(|c| c.problem).collect();
    all_problems.extend(&timed);

    let start = Instant::now();
    let built = compile_all(&tc, &sources, &variants_for(&all_problems), target);
    // GREEN checks the forward's log-sum-exp on each genome's lse twin (EVO_LSE=1).
    let twins = compile_lse_twins(&tc, &sources, &variants_for(&all_problems), target);
    eprintln!(
        "compiled {} kernels x {} variants and their lse twins in {:.1} s ({}); GPU: {}",
        sources.len(),
        variants_for(&all_problems).len(),
        start.elapsed().as_secs_f64(),
        tc.label(),
        device.name()
    );

    let start = Instant::now();
    let mut cache = GreenCache::default();
    cache.prepare(seed, &cases)?;
    eprintln!(
        "drew the inputs and computed the references of {} launches in {:.1} s",
        cases.len() * evo_gates::green::LAUNCHES_PER_CASE,
        start.elapsed().as_secs_f64()
    );

    let gpu_start = Instant::now();
    let dev = device.name().to_string();
    let eval = EvalOptions {
        seed,
        fast: FastOptions::default(),
    };
    let rows = Arc::new(Mutex::new(Vec::new()));
    let step = Arc::new(Mutex::new(None));
    watchdog(
        step.clone(),
        rows.clone(),
        args.json.clone(),
        dev.clone(),
        Duration::from_secs(args.step_timeout.max(1)),
    );
    let mut failed = Vec::new();
    for (((source, variants), twins), &place) in sources.iter().zip(&built).zip(&twins).zip(&places)
    {
        let position = format!("[{place}/{total}]");
        let kernel_start = Instant::now();
        let name = source.name();
        let id = source.genome().map(|g| g.id().to_string());
        let id = id.as_deref();
        let mut kernel_rows = Vec::new();
        let loaded = load_family(&device, name, variants).and_then(|mut f| {
            load_lse_twins(&device, &mut f, twins)?;
            Ok(f)
        });
        let mut family = match loaded {
            Ok(f) => f,
            Err(e) => {
                failed.push(format!("{name}: {e}"));
                rows.lock().expect("rows").push(Row {
                    position: Some(place),
                    ..Row::not_run(name, id, &dev, &cases[0].problem, "error", e.to_string())
                });
                continue;
            }
        };
        let (runnable, missing): (Vec<_>, Vec<_>) = cases
            .iter()
            .cloned()
            .partition(|c| family.supports(&c.problem));
        let mut compile_failed = None;
        for c in &missing {
            let why = variants
                .iter()
                .find(|v| (v.head_dim, v.dtype) == (c.problem.head_dim, c.problem.dtype))
                .and_then(|v| v.result.as_ref().err().cloned())
                .unwrap_or_default();
            let verdict = if source.unsupported(c.problem.head_dim, target).is_some() {
                "skipped"
            } else if !why.is_empty() {
                compile_failed.get_or_insert_with(|| {
                    format!("D{} {}: {why}", c.problem.head_dim, c.problem.dtype)
                });
                "compile_failed"
            } else {
                "fail"
            };
            kernel_rows.push(Row::not_run(name, id, &dev, &c.problem, verdict, why));
        }
        // One case at a time, so that the watchdog can name the case that hangs.
        let mut green: Result<GreenReport, _> = Ok(GreenReport {
            kernel: name.to_string(),
            seed,
            cases: Vec::new(),
            skipped: Vec::new(),
        });
        for case in &runnable {
            enter(
                &step,
                &position,
                place,
                name,
                id,
                format!("GREEN case {}", case.label()),
                case.problem,
            );
            let one = run_green_cached(
                &mut family,
                std::slice::from_ref(case),
                GreenOptions {
                    seed,
                    stop_at_first_failure: false,
                },
                &mut cache,
            );
            match (&mut green, one) {
                (Ok(all), Ok(report)) => {
                    all.cases.extend(report.cases);
                    all.skipped.extend(report.skipped);
                }
                (Ok(_), Err(e)) => green = Err(e),
                (Err(_), _) => break,
            }
        }
        *step.lock().expect("step") = None;
        let mut passed = false;
        match green {
            Ok(report) => {
                if !report.skipped.is_empty() {
                    eprintln!(
                        "{name}: {} case(s) its ABI cannot state ran as their basic form \
                         (multi-head, top-left or no mask, same lengths); the first: {}",
                        report.skipped.len(),
                        report.skipped[0]
                    );
                }
                passed = report.passed()
                    && !kernel_rows
                        .iter()
                        .any(|r: &Row| r.verdict == "fail" || r.verdict == "compile_failed");
                kernel_rows.extend(report.cases.iter().map(|c| Row::green(name, id, &dev, c)));
            }
            Err(e) => kernel_rows.push(Row::not_run(
                name,
                id,
                &dev,
                &runnable[0].problem,
                "error",
                e.to_string(),
            )),
        }
        let mut summary = match (&compile_failed, passed) {
            (Some(log), _) => format!("compile failed, {log}"),
            (None, true) => "GREEN pass".to_string(),
            (None, false) => "GREEN FAIL".to_string(),
        };
        if passed {
            for problem in &timed {
                if !family.supports(problem) || family.states(problem).is_err() {
                    continue;
                }
                enter(
                    &step,
                    &position,
                    place,
                    name,
                    id,
                    format!("FAST {problem}"),
                    *problem,
                );
                let result = time_and_recheck(&mut family, problem, &eval);
                *step.lock().expect("step") = None;
                match result {
                    Ok((timing, check, checked)) => {
                        if let Some(f) = &check.failure {
                            passed = false;
                            kernel_rows.push(Row::not_run(
                                name,
                                id,
                                &dev,
                                problem,
                                "fail",
                                f.clone(),
                            ));
                        }
                        let smem = family
                            .variant(problem.head_dim, problem.dtype)
                            .map(|k| k.geometry().smem_bytes);
                        let res = variants
                            .iter()
                            .find(|v| (v.head_dim, v.dtype) == (problem.head_dim, problem.dtype))
                            .and_then(|v| v.result.as_ref().ok())
                            .and_then(|c| resources(c, smem.unwrap_or(0)));
                        summary += &format!(
                            "; FAST {}: {problem}: {:.2} µs ({}), {:.1} TFLOP/s{}",
                            if check.failure.is_none() {
                                "verified"
                            } else {
                                "FAIL"
                            },
                            timing.median_us,
                            timing.method,
                            timing.tflops,
                            res.map(|r| format!(
                                ", {} regs, {} B spills",
                                r.registers, r.spill_stores
                            ))
                            .unwrap_or_default()
                        );
                        kernel_rows.push(Row {
                            checked: Some(checked),
                            ..Row::timed(name, id, &dev, &timing)
                        });
                    }
                    Err(e) => {
                        passed = false;
                        kernel_rows.push(Row::not_run(
                            name,
                            id,
                            &dev,
                            problem,
                            "error",
                            e.to_string(),
                        ));
                    }
                }
            }
        }
        if !passed {
            failed.push(name.to_string());
        }
        eprintln!(
            "{position} {name}: {summary} ({:.1} s)",
            kernel_start.elapsed().as_secs_f64()
        );
        for r in &mut kernel_rows {
            r.position = Some(place);
            r.seed = Some(seed);
        }
        rows.lock().expect("rows").extend(kernel_rows);
    }
    let rows = rows.lock().expect("rows").clone();

    report_rows(&rows, args.json.as_deref())?;
    eprintln!("GPU part {:.1} s", gpu_start.elapsed().as_secs_f64());
    if !failed.is_empty() {
        bail!(
            "{} of {} kernels failed: {}",
            failed.len(),
            sources.len(),
            failed.join(", ")
        );
    }
    eprintln!(
        "all {} kernels passed GREEN ({} cases each, seed {}); GPU part {:.1} s",
        sources.len(),
        cases.len(),
        seed,
        gpu_start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A run seed nobody chose: from the OS's randomness.
pub(crate) fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) & ((1 << 53) - 1)
}
