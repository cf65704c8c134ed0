//! `evo evolve`: run a search and write an experiment folder.
//!
//! ```text
//! experiments/<name>/
//!   experiment.toml     what was asked (re-run with --experiment to resume)
//!   evaluations.jsonl   the evaluation cache, one record per evaluation
//!   lineage.json        every candidate and the operators that made it
//!   report.md           champion, evolution path, gene-change insights
//!   best_so_far.svg     best latency against evaluations
//! ```
//! With `--backend auto` the search runs on the GPU when a CUDA device is present,
//! else it replays the recorded landscape and says so on its first line.
//!
//! Nothing measured is lost: the folder is locked while a search writes it; a resume
//! refuses an option that disagrees with experiment.toml, a lower budget, and a run that
//! would replace the recorded lineage with another search's (or, its wall time spent,
//! with less than it holds); a folder holding files but no experiment.toml is not taken
//! over; and experiment.toml is written only once the search can start, so a start that
//! failed fixes nothing.
//!
//! `--minutes` is a total across resumes: lineage.json records the wall time the search
//! has spent (`wall_s`), and a resume's clock starts there.

use anyhow::{bail, Context};
use evo_gates::outcome::files::{this_process, FolderLock};
use evo_lineage::{plot_best_so_far, write_atomic, LineageMeta, PlotError};
use evo_mutator::{
    search, EvaluationCache, Exchange, SearchConfig, Sinks, WallClock, EXPERIMENT_FILE,
    MIGRANTS_FILE,
};
use std::path::PathBuf;

/// The landscape `auto` replays without a GPU: both kernel families at the seed shape,
/// recorded on an H100 by `evo landscape`.
pub const DEFAULT_LANDSCAPE: &str = "experiments/2026-11-23-h100-landscape";

mod backend;
mod config;
mod folder;
pub(crate) mod numbers;
mod report;

pub(super) use backend::on_gpu;
use backend::{objective_label, prepare, Prepared};
use config::{config_from_args, load_genomes, resolve_config, spent_before, Refusal, Resolved};
use folder::{default_folder, lock_if_present, refuse_other_lineage};
use report::{print_champion, report, stop_reason};

#[derive(Debug, clap::Args)]
pub struct EvolveArgs {
    /// Search strategy [default: evolutionary]. `guided`: the evolutionary breeding with
    /// a cost model, trained on the records under --model-data (never on this search's
    /// shape) and corrected by this search's measurements, choosing which candidates
    /// are compiled and measured.
    #[arg(long, value_parser = ["evolutionary", "random", "exhaustive", "guided"])]
    pub strategy: Option<String>,
    /// The recorded evaluations the guided strategy's cost model learns from [default:
    /// experiments]. Recorded in experiment.toml.
    #[arg(long, value_name = "DIR")]
    pub model_data: Option<PathBuf>,
    /// The pass the kernels compute: `forward` (the default) or `backward` (dQ, dK, dV;
    /// the seeds are the backward genomes of --genomes, and GREEN and FAST are the
    /// backward's). On resume, the recorded pass.
    #[arg(long, value_parser = ["forward", "backward"])]
    pub pass: Option<String>,
    /// Stop after this many evaluations (cache hits included) [default: 200]. On resume,
    /// the new total: it may only grow.
    #[arg(long, conflicts_with = "minutes", value_parser = numbers::evaluations)]
    pub budget: Option<usize>,
    /// Stop after this many minutes of wall time instead (above 0, at most a year): a
    /// total across resumes. On resume, the time earlier runs spent (recorded in
    /// lineage.json) counts against it, and a new total may only grow.
    #[arg(long, value_parser = numbers::minutes)]
    pub minutes: Option<f64>,
    /// Seed of the search's RNG: same seed and same measurements, same lineage. On a
    /// GPU it also draws the full gate's shapes and GREEN's inputs. [default: 1 when
    /// replaying; on a GPU a fresh seed every search, printed and recorded in
    /// experiment.toml, so no kernel can be tuned to one draw]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Experiment folder: a new or empty one, or an experiment to resume from its
    /// experiment.toml (every option given must agree with it; a budget may only grow)
    /// [default: experiments/<date>-<device>-<strategy>[-steady]-s<seed>, resumed when it
    /// holds this same search, else the first free `-2`, `-3`, ...].
    #[arg(long)]
    pub experiment: Option<PathBuf>,
    /// auto (GPU if present, else replay of the recorded landscape), gpu, or replay:DIR
    /// [default: auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Candidates per generation [default: 16].
    #[arg(long, value_parser = numbers::candidates)]
    pub population: Option<usize>,
    /// Pipelined generations: from generation 2 on, breed each generation from the
    /// results one generation back, so it compiles while the GPUs measure the one ahead
    /// of it (no GPU waits for compiles at a generation's start). Another search than the
    /// plain one, as reproducible; it pays with an evaluation budget.
    #[arg(long)]
    pub pipeline: bool,
    /// Steady-state search: no generation barrier. Each answer breeds one new candidate
    /// from the population as it stands, so compiled candidates are always queued ahead
    /// of the GPUs. As reproducible: the order of answers is recorded in
    /// evaluations.jsonl, and a re-run of the experiment replays it.
    #[arg(long, conflicts_with = "pipeline")]
    pub steady: bool,
    /// Candidates a steady-state search keeps on their way (compiling, queued, running)
    /// [default: on the GPU, 3 per GPU plus one per compile thread's share of a
    /// candidate's variants; replay: 1]. Written into experiment.toml: the lineage
    /// depends on it.
    #[arg(long, value_name = "N", requires = "steady", value_parser = numbers::candidates)]
    pub in_flight: Option<usize>,
    /// Where compiled CUBINs are kept for later runs (keyed by template hash, defines,
    /// architecture and NVRTC version), or `off` [default: $XDG_CACHE_HOME/evo/cubins,
    /// else ~/.cache/evo/cubins]. GPU backend.
    #[arg(long, value_name = "DIR|off", env = "EVO_CUBIN_CACHE")]
    pub cubin_cache: Option<String>,
    /// Threads compiling candidates with NVRTC [default: one per core but one; with several
    /// GPUs, half the cores but one].
    /// `evo tune` on several GPUs gives each search its share of the cores. GPU backend.
    #[arg(long, value_name = "N", value_parser = numbers::threads)]
    pub compile_threads: Option<usize>,
    /// Folder of the named seed genomes.
    #[arg(long, default_value = "genomes")]
    pub genomes: PathBuf,
    /// The landscape `--backend auto` replays when there is no CUDA device.
    #[arg(long, default_value = DEFAULT_LANDSCAPE)]
    pub landscape: PathBuf,
    /// Fault drill: every N-th candidate runs a planted kernel from tests/faults/ (an
    /// illegal address, a hang) instead of its own, to show that a faulting or hanging
    /// kernel costs only its own evaluation. GPU backend only; never for a real search.
    #[arg(long, value_name = "N", value_parser = numbers::every_nth)]
    pub plant_faults: Option<usize>,
    /// The objective shape, `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]` [default: the seed shape
    /// 1,8,512,512,64,f16]. Replay answers only its landscape's own shape.
    #[arg(long, value_name = "SPEC", conflicts_with = "suite")]
    pub problem: Option<String>,
    /// Score candidates by the geometric mean of their medians over a suite of shapes
    /// instead (GPU backend): `anchors` = B1 H8 L512 D64, B4 H16 L1024 D64,
    /// B2 H16 L4096 D128, each causal and not, and B1 H16 L8192 D128, f16.
    #[arg(long, value_parser = ["anchors"])]
    pub suite: Option<String>,
    /// Run one worker per GPU: `all`, or ordinals such as `0,1` (GPU backend; every GPU
    /// must be the same model) [default: the first GPU].
    #[arg(long, value_name = "all|0,1,...")]
    pub gpus: Option<String>,
    /// Seconds the GPU worker may spend on one candidate before it is killed as hung
    /// [default: 60, and more for a large objective: 30 more per GiB of its Q, K, V and
    /// O and 4 more per TFLOP of its work, since FAST checks every timed launch].
    #[arg(long, value_parser = numbers::timeout_seconds)]
    pub timeout: Option<u64>,
    /// Run island K of an island-model search (counting from 0): an evolutionary search
    /// of its own that trades elites with the others through --exchange. The seed
    /// defaults to K + 1, so the islands explore differently.
    #[arg(long, value_name = "K", requires_all = ["islands", "exchange"])]
    pub island: Option<u32>,
    /// How many islands the search has.
    #[arg(long, value_name = "N", requires = "island")]
    pub islands: Option<u32>,
    /// The folder, shared by every island (on a cluster: a shared filesystem), where
    /// islands publish their elites.
    #[arg(long, value_name = "DIR", requires = "island")]
    pub exchange: Option<PathBuf>,
    /// Publish elites and take in migrants every G generations [default: 2].
    #[arg(long, value_name = "G", requires = "island")]
    pub migrate_every: Option<u32>,
    /// Elites published, and migrants taken in, per exchange [default: 2].
    #[arg(long, value_name = "M", requires = "island")]
    pub migrants: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `YYYY-MM-DD` (UTC) of now, for default experiment names.
pub(crate) fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days to civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

pub fn run(args: EvolveArgs) -> anyhow::Result<()> {
    let genomes = load_genomes(&args.genomes)?;
    let (dir, resolved, prepared, lock) = match &args.experiment {
        Some(dir) => {
            let lock = lock_if_present(dir)?;
            let resolved = resolve_config(&args, dir, &genomes)?;
            let prepared = prepare(&resolved.config, resolved.config.backend(), &args)?;
            (dir.clone(), resolved, prepared, lock)
        }
        None => {
            // The default name carries the device, known only once the backend is up,
            // and says `replay` when the numbers are a recorded landscape's.
            let fresh = config_from_args(&args, "pending", &genomes)?;
            let prepared = prepare(&fresh, fresh.backend(), &args)?;
            let base = PathBuf::from("experiments").join(format!(
                "{}-{}{}-{}{}-s{}{}",
                today(),
                if prepared.replayed { "replay-" } else { "" },
                slug(&prepared.evaluator.device()),
                fresh.strategy,
                if fresh.evolutionary.steady {
                    "-steady"
                } else {
                    ""
                },
                fresh.seed,
                fresh
                    .island
                    .as_ref()
                    .map_or(String::new(), |i| format!("-island{}", i.island))
            ));
            let (dir, resolved, lock) = default_folder(&args, &base, &fresh, &genomes)?;
            (dir, resolved, prepared, lock)
        }
    };
    let Resolved {
        mut config,
        mut write,
        resumed,
    } = resolved;
    let Prepared {
        mut evaluator,
        space,
        objective,
        ..
    } = prepared;
    // A steady-state search's lineage depends on how many candidates it keeps in
    // flight: the evaluator's choice is fixed in the experiment, so a re-run or a
    // resume on another machine keeps it.
    if config.evolutionary.steady && config.evolutionary.in_flight.is_none() {
        config.evolutionary.in_flight = Some(evaluator.in_flight());
        write = true;
    }
    let device = evaluator.device();
    let largest = objective
        .iter()
        .map(|p| p.head_dim)
        .max()
        .expect("not empty");
    if space.head_dim != largest {
        bail!(
            "the search space is for D = {}, the objective needs D = {largest}",
            space.head_dim,
        );
    }
    let label = objective_label(&objective);
    let seeds = config
        .seeds
        .iter()
        .map(|name| {
            let file = genomes.get(name).cloned().with_context(|| {
                format!(
                    "{}: seed `{name}` is not in {}",
                    dir.join(EXPERIMENT_FILE).display(),
                    args.genomes.display()
                )
            })?;
            if file.genes.pass() != space.pass() {
                bail!(
                    "{}: seed `{name}` is a {} kernel ({}), and this is a {} search; remove it \
                     from `seeds`",
                    dir.join(EXPERIMENT_FILE).display(),
                    file.genes.pass(),
                    file.genes.family,
                    space.pass()
                );
            }
            Ok(file)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let lineage_path = dir.join("lineage.json");
    if resumed {
        refuse_other_lineage(&lineage_path, &device, &label)?;
    }

    // Another search running as the same island would overwrite this one's elites.
    let _island = config
        .island
        .as_ref()
        .map(evo_mutator::island::claim)
        .transpose()?;

    // The search can start: only now is the folder made and its record written, so a
    // start that failed leaves nothing that fixes its options.
    let _lock = match lock {
        Some(lock) => lock,
        None => {
            std::fs::create_dir_all(&dir).with_context(|| {
                format!("{}: cannot create the experiment folder", dir.display())
            })?;
            let lock = FolderLock::acquire(&dir, &this_process())?;
            if !resumed && dir.join(EXPERIMENT_FILE).exists() {
                bail!(
                    "{}: another search started here while this one prepared; resume it with `evo evolve --experiment {}`",
                    dir.display(),
                    dir.display()
                );
            }
            lock
        }
    };
    let scope = evo_mutator::CacheScope {
        objective: label.clone(),
        device: device.clone(),
        template_hash: evaluator.template_hash(),
        toolchain: evaluator.toolchain(),
    };
    let cache_path = dir.join("evaluations.jsonl");
    let mut cache = EvaluationCache::open(&cache_path, scope)?;
    for w in &cache.report.warnings {
        eprintln!("warning: {w}");
    }
    if cache.report.other_scope > 0 {
        eprintln!(
            "note: {} records in {} are for another template, toolchain or objective and are not reused",
            cache.report.other_scope,
            cache_path.display()
        );
    }
    // Records on file and none of them this search's: another template, toolchain or
    // landscape of the same device. The search would start over and replace the lineage.
    if resumed
        && cache.report.reusable == 0
        && cache.report.other_scope > 0
        && lineage_path.exists()
    {
        return Err(Refusal(format!(
            "{}: none of its {} records is for this search (template {}, toolchain {}, {label} on `{device}`), so this run would start over and replace {}; resume it with the backend and landscape it was recorded with, or use a new --experiment folder",
            cache_path.display(),
            cache.report.other_scope,
            evaluator.template_hash(),
            evaluator.toolchain(),
            lineage_path.display()
        ))
        .into());
    }
    if write {
        config.save(&dir.join(EXPERIMENT_FILE))?;
    }
    let on_record = cache.len();
    let search_config = SearchConfig {
        strategy: config.strategy,
        params: config.evolutionary.clone(),
        budget: config.budget(),
        seed: config.seed,
        seeds,
        meta: LineageMeta {
            title: config.name.clone(),
            device: device.clone(),
            objective: label.clone(),
            strategy: config.strategy.to_string(),
            seed: Some(config.seed),
        },
        quiet: args.quiet,
        model: match &config.model_data {
            Some(data) => {
                let [problem] = objective.as_slice() else {
                    bail!("the guided strategy searches one shape; give --problem, not --suite");
                };
                let model = super::cost_model::train(data, &device, config.pass, *problem, &[])?;
                println!("cost model: {}", model.0.describe());
                Some(model)
            }
            None => None,
        },
    };
    // A wall budget is a total across resumes: the clock goes on from the time the
    // earlier runs spent.
    let before = spent_before(resumed, &lineage_path, search_config.budget)?;
    let minutes = config.budget.minutes.unwrap_or_default();
    let clock = match &before {
        Some(b) => {
            println!(
                "resuming: {:.1} of {} minutes already spent{}",
                b.time.as_secs_f64() / 60.0,
                minutes,
                if b.is_all() {
                    "; replaying the record only"
                } else {
                    ""
                }
            );
            WallClock::resumed(b.time)
        }
        None => WallClock::start(),
    };
    // With no time left the search only replays its record; the lineage on file is
    // replaced only if the replay rebuilt all of it.
    let spent = before.filter(|b| b.is_all());
    let mut exchange = match &config.island {
        Some(island) => {
            let exchange = Exchange::open(island.clone(), &dir.join(MIGRANTS_FILE))?;
            for w in &exchange.warnings {
                eprintln!("warning: {w}");
            }
            println!(
                "island {} of {}: trading {} elites every {} generations through {}",
                island.island,
                island.islands,
                island.migrants,
                island.every,
                island.exchange.display()
            );
            Some(exchange)
        }
        None => None,
    };
    let outcome = search(
        &search_config,
        &space,
        evaluator.as_mut(),
        Sinks {
            cache: Some(&mut cache),
            lineage_path: spent.is_none().then_some(lineage_path.as_path()),
            exchange: exchange.as_mut(),
        },
        &clock,
    )?;
    if let Some(spent) = &spent {
        if outcome.lineage.len() < spent.candidates {
            return Err(Refusal(format!(
                "{}: records wall_s = {}, all of budget.minutes = {} in {}, and with no time left this run rebuilt only {} of its {} candidates from {}{}; it is kept as it is: give --minutes larger than {} to go on",
                lineage_path.display(),
                spent.wall_s,
                minutes,
                dir.join(EXPERIMENT_FILE).display(),
                outcome.lineage.len(),
                spent.candidates,
                cache_path.display(),
                if config.evolutionary.steady {
                    " (a steady-state search submits nothing once its time is spent)"
                } else {
                    ""
                },
                (spent.time.as_secs_f64() / 6.0).ceil() / 10.0,
            ))
            .into());
        }
    }
    outcome.lineage.save(&lineage_path)?;

    let plot_path = dir.join("best_so_far.svg");
    let plot_note = match plot_best_so_far(&outcome.lineage, &plot_path) {
        Ok(()) => None,
        Err(e @ PlotError::Empty) => Some(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    let report_path = dir.join("report.md");
    let mut report = report(
        &config,
        &dir,
        &evaluator.describe(),
        &outcome,
        on_record,
        plot_note.as_deref(),
    );
    // Where the GPUs' time went: how much of the run each one computed, and how long it
    // waited for compiles (the start of each generation, a new best's full gate).
    let usage = evaluator.utilization();
    if !usage.is_empty() {
        report += "\n## GPU time\n\n";
        for line in &usage {
            report += &format!("- {line}\n");
        }
    }
    if let (Some(quality), Some(model)) = (&outcome.model_quality, &search_config.model) {
        report += &format!(
            "\n## Cost model\n\n- {}\n- This search: {quality}\n",
            model.0.describe()
        );
    }
    write_atomic(&report_path, report.as_bytes())
        .with_context(|| format!("{}: cannot write", report_path.display()))?;

    println!(
        "{} evaluations: {} fresh, {} from the cache ({} were on record in {}); {} passed, {} failed; stopped: {}",
        outcome.evaluations,
        outcome.evaluations - outcome.cache_hits,
        outcome.cache_hits,
        on_record,
        cache_path.display(),
        outcome.ok,
        outcome.failed,
        stop_reason(outcome.stop)
    );
    for line in &usage {
        println!("  {line}");
    }
    if let Some(quality) = &outcome.model_quality {
        println!("  cost model: {quality}");
    }
    print_champion(&outcome.lineage);
    println!("report: {}", report_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn today_is_a_date() {
        let d = super::today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"), "{d}");
    }

    #[test]
    fn slug_is_lowercase_words() {
        assert_eq!(
            super::slug("NVIDIA H100 80GB HBM3"),
            "nvidia-h100-80gb-hbm3"
        );
    }
}
