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
use evo_gates::report::{green_table, Row};
use evo_gates::suite::{drawn_cases, load_suite, DRAWN_CASES};
use evo_gates::{AttentionKernel, Device, EvalOptions, FastOptions, GreenSuite, TimingSuite};
use evo_genome::{Dtype, Family, GenomeFile, Problem};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Genome files (genomes/*.toml).
    pub genomes: Vec<PathBuf>,
    /// Hand-written kernel files under kernels/ABI.md (repeatable).
    #[arg(long = "source", value_name = "FILE.cu")]
    pub sources: Vec<PathBuf>,
    /// Also gate N genomes drawn uniformly from the valid space (valid at D64 and D128).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub sample: usize,
    /// Draw the --sample genomes from one kernel family only.
    #[arg(long, value_parser = ["ampere", "hopper"])]
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

/// `--shard K/N`: the K-th (from 1) of N parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("`{s}` is not K/N; write e.g. 1/2 for the first of two parts");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || k == 0 || k > n {
        return Err(format!("`{s}`: K must be between 1 and N"));
    }
    Ok(Shard { k, n })
}

/// The list positions (from 1) a gate runs: from `from` on, and of those only its shard's.
fn positions(total: usize, from: usize, shard: Option<Shard>) -> Vec<usize> {
    (from..=total)
        .filter(|p| shard.is_none_or(|s| (p - from) % s.n == s.k - 1))
        .collect()
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
fn report_rows(rows: &[Row], json: Option<&std::path::Path>) -> anyhow::Result<()> {
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

/// Genome files and hand-written `.cu` files as the gates' kernel sources, in order.
pub fn load_sources(genomes: &[PathBuf], files: &[PathBuf]) -> anyhow::Result<Vec<KernelSource>> {
    let mut sources = Vec::new();
    for path in genomes {
        let f = GenomeFile::load(path)?;
        sources.push(KernelSource::Genome {
            name: f.name,
            genome: f.genes,
        });
    }
    for path in files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        sources.push(KernelSource::File {
            path: path.display().to_string(),
            text,
        });
    }
    Ok(sources)
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
    let mut all_problems: Vec<Problem> = cases.iter().map(|c| c.problem).collect();
    all_problems.extend(&timed);

    let start = Instant::now();
    let built = compile_all(&tc, &sources, &variants_for(&all_problems), target);
    eprintln!(
        "compiled {} kernels x {} variants in {:.1} s ({}); GPU: {}",
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
    for ((source, variants), &place) in sources.iter().zip(&built).zip(&places) {
        let position = format!("[{place}/{total}]");
        let kernel_start = Instant::now();
        let name = source.name();
        let id = source.genome().map(|g| g.id().to_string());
        let id = id.as_deref();
        let mut kernel_rows = Vec::new();
        let mut family = match load_family(&device, name, variants) {
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

/// The command line of one GPU's shard: this process's arguments without `--gpus` and
/// `--json` (the shard writes its own JSON for the parent to merge), `--save-samples`
/// kept for the first shard only (every shard draws the same sample).
fn shard_args(argv: &[String], shard: Shard, json: &std::path::Path) -> Vec<String> {
    let mut dropped = vec!["--gpus", "--json"];
    if shard.k > 1 {
        dropped.push("--save-samples");
    }
    let mut out = Vec::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if dropped.contains(&a.as_str()) {
            it.next();
            continue;
        }
        if dropped.iter().any(|f| a.starts_with(&format!("{f}="))) {
            continue;
        }
        out.push(a.clone());
    }
    out.push("--shard".into());
    out.push(format!("{}/{}", shard.k, shard.n));
    out.push("--json".into());
    out.push(json.display().to_string());
    out
}

/// What the shards of a gate over several GPUs left.
struct Shards {
    /// Every shard's rows, each naming its GPU (unsorted).
    rows: Vec<Row>,
    /// GPUs whose shard stopped at a hung kernel (exit status 3).
    hung: Vec<u32>,
    /// GPUs whose shard ended with another error status, with the status.
    broken: Vec<String>,
}

/// Runs `exe` with `argv` once per GPU as `--shard K/N` (pinned by CUDA_VISIBLE_DEVICES),
/// relays their progress lines prefixed with the GPU, and collects their rows.
fn run_shards(exe: &std::path::Path, argv: &[String], gpus: &[u32]) -> anyhow::Result<Shards> {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("evo-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let n = gpus.len();
    let mut shards = Vec::new();
    for (i, &g) in gpus.iter().enumerate() {
        let shard = Shard { k: i + 1, n };
        let json = dir.join(format!("shard-{}.json", shard.k));
        let mut child = std::process::Command::new(exe)
            .args(shard_args(argv, shard, &json))
            .env("CUDA_VISIBLE_DEVICES", g.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("GPU {g}: cannot start {}", exe.display()))?;
        let err = child.stderr.take().expect("piped");
        let relay = std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("GPU {g} | {line}");
            }
        });
        shards.push((g, child, relay, json));
    }
    let mut out = Shards {
        rows: Vec::new(),
        hung: Vec::new(),
        broken: Vec::new(),
    };
    for (g, mut child, relay, json) in shards {
        let status = child
            .wait()
            .with_context(|| format!("GPU {g}: lost its gate process"))?;
        let _ = relay.join();
        match status.code() {
            Some(0) => {}
            Some(3) => out.hung.push(g),
            _ => out.broken.push(format!("GPU {g} ({status})")),
        }
        // A shard that ended early wrote what it measured (or nothing, if it never ran).
        if let Ok(text) = std::fs::read_to_string(&json) {
            let rows: Vec<Row> = serde_json::from_str(&text)
                .with_context(|| format!("{}: unreadable shard rows", json.display()))?;
            out.rows
                .extend(rows.into_iter().map(|r| Row { gpu: Some(g), ..r }));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// `evo gate --gpus 0,1,...`: one `evo gate --shard K/N` process per GPU (each pinned by
/// CUDA_VISIBLE_DEVICES, with its own watchdog), their rows merged in list order.
/// A run seed nobody chose: from the OS's randomness.
pub(crate) fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) & ((1 << 53) - 1)
}

fn run_on_gpus(args: &GateArgs, seed: u64, gpus: &[u32]) -> anyhow::Result<()> {
    let mut models = Vec::new();
    for &g in gpus {
        let device = Device::open(g as usize).with_context(|| format!("GPU {g}"))?;
        models.push((g, device.name().to_string()));
    }
    evo_worker::require_one_model("gate", &models)?;
    let exe = std::env::current_exe().context("cannot find the evo executable")?;
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    if !argv
        .iter()
        .any(|a| a == "--seed" || a.starts_with("--seed="))
    {
        // Every shard draws the same shapes, inputs and sample.
        argv.extend(["--seed".to_string(), seed.to_string()]);
    }
    let n = gpus.len();
    eprintln!(
        "gating on {n} GPUs ({}, {}): one `evo gate --shard K/{n}` process each",
        gpus.iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join(","),
        models[0].1
    );
    let start = Instant::now();
    let Shards {
        mut rows,
        hung,
        broken,
    } = run_shards(&exe, &argv, gpus)?;
    rows.sort_by_key(|r| r.position);
    report_rows(&rows, args.json.as_deref())?;
    let mut failed: Vec<String> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| !matches!(r.verdict.as_str(), "pass" | "timed" | "skipped"))
    {
        if !failed.contains(&r.kernel) {
            failed.push(r.kernel.clone());
        }
    }
    let kernels = rows
        .iter()
        .filter_map(|r| r.position)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    eprintln!(
        "{kernels} kernels on {n} GPUs in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if !hung.is_empty() {
        eprintln!(
            "the shard of GPU {} stopped at a hung kernel (its TIMEOUT line above names it); the rows so far are merged",
            hung.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(", GPU ")
        );
        std::process::exit(3);
    }
    if !failed.is_empty() {
        bail!(
            "{} of {kernels} kernels failed: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    if !broken.is_empty() {
        bail!(
            "the gate processes of {} ended with an error (see their lines above)",
            broken.join(", ")
        );
    }
    eprintln!("all {kernels} kernels passed GREEN on {n} GPUs");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_the_list_from_its_start_and_cover_it_once() {
        assert_eq!(positions(5, 1, None), [1, 2, 3, 4, 5]);
        assert_eq!(positions(5, 3, None), [3, 4, 5]);
        let a = positions(7, 2, Some(Shard { k: 1, n: 3 }));
        let b = positions(7, 2, Some(Shard { k: 2, n: 3 }));
        let c = positions(7, 2, Some(Shard { k: 3, n: 3 }));
        assert_eq!(
            (a.clone(), b.clone(), c.clone()),
            (vec![2, 5], vec![3, 6], vec![4, 7])
        );
        let mut all: Vec<usize> = [a, b, c].concat();
        all.sort_unstable();
        assert_eq!(all, positions(7, 2, None));
    }

    /// The parent with a stand-in shard program (a shell script): rows of every shard
    /// come back naming their GPU, a shard that hung (status 3) and one that failed are
    /// told apart, and each shard was pinned to its GPU.
    #[test]
    fn shards_rows_are_merged_and_their_endings_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = Problem::seed();
        let row = |kernel: &str, position: usize, verdict: &str| Row {
            position: Some(position),
            ..Row::not_run(kernel, None, "GPU model", &p, verdict, String::new())
        };
        // Shard K of 3 wrote rows-K.json and exits with status-K (positions 1..=5 split
        // 1,4 / 2,5 / 3).
        let shards = [
            (vec![row("a", 1, "pass"), row("d", 4, "pass")], 0),
            (vec![row("b", 2, "pass"), row("e", 5, "timeout")], 3),
            (vec![row("c", 3, "fail")], 1),
        ];
        for (k, (rows, status)) in shards.iter().enumerate() {
            let k = k + 1;
            std::fs::write(
                dir.path().join(format!("rows-{k}.json")),
                serde_json::to_string(rows).unwrap(),
            )
            .unwrap();
            std::fs::write(dir.path().join(format!("status-{k}")), status.to_string()).unwrap();
        }
        let script = dir.path().join("shard.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nd={}\nwhile [ $# -gt 0 ]; do case $1 in --shard) s=$2;; --json) j=$2;; esac; shift; done\n\
                 k=${{s%/*}}\necho $CUDA_VISIBLE_DEVICES > $d/pinned-$k\ncp $d/rows-$k.json $j\nexit $(cat $d/status-$k)\n",
                dir.path().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = ["gate", "--gpus", "4,5,6", "x.toml"].map(String::from);
        let out = run_shards(&script, &argv, &[4, 5, 6]).unwrap();
        let mut rows = out.rows;
        rows.sort_by_key(|r| r.position);
        let got: Vec<(&str, Option<u32>)> =
            rows.iter().map(|r| (r.kernel.as_str(), r.gpu)).collect();
        assert_eq!(
            got,
            [
                ("a", Some(4)),
                ("b", Some(5)),
                ("c", Some(6)),
                ("d", Some(4)),
                ("e", Some(5))
            ]
        );
        for (k, g) in [(1, "4"), (2, "5"), (3, "6")] {
            let pinned = std::fs::read_to_string(dir.path().join(format!("pinned-{k}"))).unwrap();
            assert_eq!(pinned.trim(), g, "shard {k}");
        }
        assert_eq!(out.hung, [5]);
        assert_eq!(out.broken.len(), 1);
        assert!(out.broken[0].starts_with("GPU 6"), "{:?}", out.broken);
    }

    #[test]
    fn shard_is_k_of_n() {
        assert_eq!(parse_shard("2/3"), Ok(Shard { k: 2, n: 3 }));
        assert!(parse_shard("0/3").unwrap_err().contains("between 1 and N"));
        assert!(parse_shard("4/3").unwrap_err().contains("between 1 and N"));
        assert!(parse_shard("2").unwrap_err().contains("is not K/N"));
        assert!(parse_shard("a/b").unwrap_err().contains("is not K/N"));
    }

    #[test]
    fn a_shard_runs_the_same_command_without_gpus_and_with_its_own_json() {
        let argv: Vec<String> = [
            "gate",
            "--gpus",
            "0,1",
            "genomes/fa2.toml",
            "--json=out.json",
            "--sample",
            "8",
            "--save-samples",
            "drawn",
        ]
        .map(String::from)
        .to_vec();
        let json = std::path::Path::new("shard-1.json");
        assert_eq!(
            shard_args(&argv, Shard { k: 1, n: 2 }, json),
            [
                "gate",
                "genomes/fa2.toml",
                "--sample",
                "8",
                "--save-samples",
                "drawn",
                "--shard",
                "1/2",
                "--json",
                "shard-1.json"
            ]
        );
        assert_eq!(
            shard_args(&argv, Shard { k: 2, n: 2 }, json),
            [
                "gate",
                "genomes/fa2.toml",
                "--sample",
                "8",
                "--shard",
                "2/2",
                "--json",
                "shard-1.json"
            ]
        );
    }
}
