//! `evo bench`: candidates against the baselines, in one run, timed the same way.
//!
//! Candidates (genomes, `.cu` files) and the cuBLAS hybrid pass GREEN's quick suite
//! first (FAST never times a wrong kernel), then FAST times each shape of the suite
//! and re-checks the output after timing. PyTorch SDPA (cuDNN, flash, efficient) runs
//! last through scripts/sdpa_baseline.py when torch is importable, after this process
//! has freed its buffers. One table per shape: µs, TFLOP/s, speedup vs each baseline.
//!
//! `--champions DIR --backward` times the table's backward genomes instead
//! ([`backward`]).

use anyhow::{bail, Context};
use evo_codegen::Toolchain;
use evo_gates::baselines::{run_sdpa, torch_available, SdpaResult};
use evo_gates::compile::{compile_all, cublas_hybrid, load_family, variants_for};
use evo_gates::evaluate::time_and_recheck;
use evo_gates::green::{run_green_cached, GreenCache, GreenOptions};
use evo_gates::report::{bench_table, green_table, Row};
use evo_gates::suite::Case;
use evo_gates::{AttentionKernel, Device, EvalOptions, FastOptions, GreenSuite, TimingSuite};
use evo_genome::{Dtype, Problem};
use std::path::{Path, PathBuf};
use std::time::Instant;

mod backward;
mod backward_table;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Genome files (genomes/*.toml).
    pub genomes: Vec<PathBuf>,
    /// Hand-written kernel files under kernels/ABI.md (repeatable).
    #[arg(long = "source", value_name = "FILE.cu")]
    pub sources: Vec<PathBuf>,
    /// The shapes: the seed shape; `anchors`: B1 H8 L512 D64 / B4 H16 L1024 D64 /
    /// B2 H16 L4096 D128, each causal and not, and B1 H16 L8192 D128; `models`: Llama-3-8B
    /// prefill B1 H32/8 L4096 D128 causal and decode B16 H32/8 Lq1 Lk8192, a sliding-window
    /// prefill (4096 of 8192 keys), a multi-query decode (H32/1), Gemma-2-9B's prefill
    /// B1 H16/8 L4096 D256 causal, Phi-3-mini's B1 H32 L4096 D96 causal.
    #[arg(long, default_value = "anchors", value_parser = ["seed", "anchors", "models"])]
    pub suite: String,
    /// Time these shapes instead of the suite (repeatable), each
    /// `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]`; the spec's dtype
    /// is used, not --dtype.
    #[arg(long = "problem", value_name = "SPEC", conflicts_with = "champions")]
    pub problems: Vec<String>,
    #[arg(long, default_value = "f16", value_parser = ["f16", "bf16"])]
    pub dtype: String,
    #[arg(long, default_value_t = 2026, env = "EVO_SEED")]
    pub seed: u64,
    /// Skip the PyTorch SDPA baselines even when torch is importable.
    #[arg(long)]
    pub no_sdpa: bool,
    #[arg(long, default_value = "scripts/sdpa_baseline.py")]
    pub sdpa_script: PathBuf,
    /// PyTorch's backward baselines, for --backward.
    #[arg(long, default_value = "scripts/sdpa_backward_baseline.py")]
    pub sdpa_backward_script: PathBuf,
    /// Write one JSON object per kernel × shape here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Time the per-shape champions of a champions folder instead (its dispatch.toml):
    /// each champion on its own shape, the baselines on every shape.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["genomes", "sources"])]
    pub champions: Option<PathBuf>,
    /// With --champions: write this run's figures (the champion's µs and genome, every
    /// baseline's µs, the --json file) into dispatch.toml and the champions' headers.
    #[arg(long, requires = "champions")]
    pub record: bool,
    /// Also time every kernel and SDPA backend on a cold L2 (each launch alone, after a
    /// read over twice the L2's size), in rows named "... (cold L2)"; not the cuBLAS
    /// hybrid, which is the seeds' baseline. With --backward: PyTorch's backward kernels
    /// too (evo's backward timing always takes both).
    #[arg(long)]
    pub cold_l2: bool,
    /// With --champions: time the table's backward genomes ([[backward]], one per head
    /// dim) instead, each on the shapes of the classes it serves, against PyTorch's
    /// backward kernels (cuDNN, flash); one row per class.
    #[arg(long, requires = "champions")]
    pub backward: bool,
}

/// The dtype a `--dtype` value names (clap checked it).
fn dtype_of(label: &str) -> Dtype {
    if label == "bf16" {
        Dtype::Bf16
    } else {
        Dtype::F16
    }
}

/// PyTorch's rows from `script` (`backends`, empty: the script's own list) on
/// `problems`; `None`, said on stderr, with `--no-sdpa` or without a torch that sees the
/// GPU. A script that fails yields no rows and says why: a broken torch install must not
/// cost the table of everything else. `what` names the baselines in those messages.
fn sdpa_rows(
    args: &BenchArgs,
    script: &Path,
    problems: &[Problem],
    backends: &[&str],
    what: &str,
) -> Option<Vec<SdpaResult>> {
    if args.no_sdpa {
        eprintln!("{what} skipped (--no-sdpa)");
        return None;
    }
    if !torch_available() {
        eprintln!("{what} skipped: `python3 -c 'import torch'` failed or torch sees no GPU");
        return None;
    }
    Some(
        run_sdpa(script, problems, args.seed, args.cold_l2, backends).unwrap_or_else(|e| {
            eprintln!("{what} failed, left out of the table: {e}");
            Vec::new()
        }),
    )
}

/// The name of a kernel's cold-L2 rows.
fn cold_name(name: &str) -> String {
    format!("{name} (cold L2)")
}

/// GREEN (`cases`: the quick suite's cases the kernel was built for), then FAST on each
/// problem the kernel supports (`runs[i]`), with a re-check after timing. The problem's index in the suite keys its inputs, so every
/// kernel is timed on the same data.
#[allow(clippy::too_many_arguments)]
fn gate_and_time(
    kernel: &mut dyn AttentionKernel,
    cases: &[Case],
    id: Option<&str>,
    device: &str,
    problems: &[Problem],
    runs: &[bool],
    seed: u64,
    cache: &mut GreenCache,
    rows: &mut Vec<Row>,
    cold_l2: bool,
) -> anyhow::Result<()> {
    let name = kernel.name().to_string();
    let green = run_green_cached(
        kernel,
        cases,
        GreenOptions {
            seed,
            stop_at_first_failure: true,
        },
        cache,
    )?;
    let green_rows: Vec<Row> = green
        .cases
        .iter()
        .map(|c| Row::green(&name, id, device, c))
        .collect();
    rows.extend(green_rows.iter().cloned());
    if !green.passed() {
        eprint!("{}", green_table(&green_rows));
        eprintln!("{name}: GREEN failed, not timed");
        return Ok(());
    }
    let eval = EvalOptions {
        seed,
        fast: FastOptions::default(),
    };
    for (n, p) in problems.iter().enumerate() {
        if !runs[n] {
            continue;
        }
        let (timing, check, checked) = time_and_recheck(kernel, p, &eval)?;
        if let Some(f) = check.failure {
            rows.push(Row::not_run(
                &name,
                id,
                device,
                p,
                "fail",
                format!("re-check after timing: {f}"),
            ));
            eprintln!("{name} {p}: failed the re-check after timing: {f}");
            continue;
        }
        eprintln!(
            "{name} {p}: {:.2} µs ({} x{}), {:.1} TFLOP/s",
            timing.median_us, timing.method, timing.launches_per_repeat, timing.tflops
        );
        rows.push(Row {
            checked: Some(checked),
            ..Row::timed(&name, id, device, &timing)
        });
        if cold_l2 {
            let cold = EvalOptions {
                fast: FastOptions {
                    cold_l2: true,
                    ..eval.fast
                },
                ..eval
            };
            let (timing, check, checked) = time_and_recheck(kernel, p, &cold)?;
            let cold = cold_name(&name);
            if let Some(f) = check.failure {
                let why = format!("re-check after cold-L2 timing: {f}");
                eprintln!("{cold} {p}: {why}");
                rows.push(Row::not_run(&cold, id, device, p, "fail", why));
                continue;
            }
            eprintln!("{cold} {p}: {:.2} µs", timing.median_us);
            rows.push(Row {
                checked: Some(checked),
                ..Row::timed(&cold, id, device, &timing)
            });
        }
    }
    Ok(())
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.backward {
        if args.record {
            bail!(
                "--record with --backward: recording backward figures into dispatch.toml is \
                 not supported (its [[backward]] entries hold no figures); drop --record, and \
                 add --json FILE to keep this run's figures"
            );
        }
        let dir = args.champions.as_deref().context(
            "--backward times a champions folder's backward genomes: add --champions DIR",
        )?;
        return backward::run(&args, dir);
    }
    let dtype = dtype_of(&args.dtype);
    // With --champions: the classes' shapes in this dtype, each champion on its own.
    // A writer of the folder (--record) holds its lock from the read to the write, so
    // that `evo champions` cannot change the table in between.
    let _lock = match (&args.champions, args.record) {
        (Some(dir), true) => Some(super::champions::lock_champions(dir)?),
        _ => None,
    };
    let table = match &args.champions {
        Some(dir) => {
            let (table, _) = super::champions::load_table(dir)?;
            Some((dir.join(evo_genome::dispatch::DISPATCH_FILE), table))
        }
        None => None,
    };
    let (problems, sources) = match (&table, &args.champions) {
        (Some((_, t)), Some(dir)) => {
            let mut problems = Vec::new();
            let mut sources = Vec::new();
            for c in &t.classes {
                problems.push(Problem {
                    dtype,
                    ..c.problem().map_err(|e| anyhow::anyhow!("{e}"))?
                });
                let file = evo_genome::GenomeFile::load(&dir.join(&c.champion))?;
                sources.push(evo_gates::compile::KernelSource::Genome {
                    name: format!("champion {}", c.name),
                    genome: file.genes,
                });
            }
            (problems, sources)
        }
        _ if !args.problems.is_empty() => (
            args.problems
                .iter()
                .map(|s| {
                    s.parse::<Problem>()
                        .map_err(|e| anyhow::anyhow!("--problem {e}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
            super::gate::load_sources(&args.genomes, &args.sources)?,
        ),
        _ => (
            TimingSuite::parse(&args.suite)
                .expect("clap checked")
                .problems(dtype),
            super::gate::load_sources(&args.genomes, &args.sources)?,
        ),
    };
    // Champion i is timed on class i's shape only; other kernels on every shape.
    let own_shape_only = table.is_some();
    let device = Device::open(0)?;
    let target = super::device_target(&device)?;
    let tc = Toolchain::discover()?;
    evo_gates::compile::install_verifier(&tc, &device)?;
    let dev = device.name().to_string();
    let mut needed: Vec<Problem> = GreenSuite::Quick
        .cases()
        .iter()
        .map(|c| c.problem)
        .collect();
    needed.extend(&problems);
    let start = Instant::now();
    let built = compile_all(&tc, &sources, &variants_for(&needed), target);
    eprintln!(
        "compiled {} kernels in {:.1} s; GPU: {dev}",
        sources.len(),
        start.elapsed().as_secs_f64()
    );

    let mut rows = Vec::new();
    let mut cache = GreenCache::default();
    cache.prepare(args.seed, &GreenSuite::Quick.cases())?;
    for (s, (source, variants)) in sources.iter().zip(&built).enumerate() {
        let id = source.genome().map(|g| g.id().to_string());
        if let Some(v) = variants.iter().find(|v| v.result.is_err()) {
            let why = v.result.as_ref().err().cloned().unwrap_or_default();
            eprintln!(
                "{}: D{} {} not built: {why}",
                source.name(),
                v.head_dim,
                v.dtype
            );
        }
        let mut family = load_family(&device, source.name(), variants)?;
        // A genome invalid at one head dim (shared memory, registers) is checked and
        // timed at the others.
        let cases: Vec<Case> = GreenSuite::Quick
            .cases()
            .into_iter()
            .filter(|c| family.supports(&c.problem))
            .collect();
        let runs: Vec<bool> = problems
            .iter()
            .enumerate()
            .map(|(i, p)| {
                family.supports(p) && family.states(p).is_ok() && (!own_shape_only || i == s)
            })
            .collect();
        gate_and_time(
            &mut family,
            &cases,
            id.as_deref(),
            &dev,
            &problems,
            &runs,
            args.seed,
            &mut cache,
            &mut rows,
            args.cold_l2,
        )?;
        // Each kernel's rows reach the file as they are measured, so a run stopped
        // later (a time limit, a hang) keeps them; the final write adds the baselines.
        if let Some(path) = &args.json {
            std::fs::write(path, serde_json::to_string_pretty(&rows)?)
                .with_context(|| format!("{}: cannot write", path.display()))?;
        }
    }
    {
        let mut hybrid = cublas_hybrid(&tc, &device, target)?;
        // The hybrid states multi-head attention with a top-left mask or none only; the
        // SDPA baselines stand beside the other problems.
        let stated: Vec<bool> = problems.iter().map(|p| hybrid.states(p).is_ok()).collect();
        gate_and_time(
            &mut hybrid,
            &GreenSuite::Quick.cases(),
            None,
            &dev,
            &problems,
            &stated,
            args.seed,
            &mut cache,
            &mut rows,
            false,
        )?;
    }
    drop(device);

    let mut baselines = vec!["cublas-hybrid".to_string()];
    if let Some(sdpa) = sdpa_rows(&args, &args.sdpa_script, &problems, &[], "SDPA baselines") {
        for r in sdpa {
            let kernel = match r.timing.as_str() {
                "cold-l2" => cold_name(&r.name()),
                _ => r.name(),
            };
            if !baselines.contains(&kernel) {
                baselines.push(kernel.clone());
            }
            let mut row =
                Row::not_run(&kernel, None, &r.device, &r.problem, "timed", String::new());
            row.reason = r.error.clone();
            if r.error.is_some() {
                row.verdict = "error".into();
            }
            row.median_us = r.median_us;
            row.min_us = r.min_us;
            row.max_us = r.max_us;
            row.tflops = r.tflops;
            row.rel_frob = r.rel_frob;
            row.max_abs = r.max_abs;
            row.method = r.median_us.map(|_| r.timing.clone());
            rows.push(row);
        }
    }
    let timed: Vec<Row> = rows
        .iter()
        .filter(|r| r.median_us.is_some())
        .cloned()
        .collect();
    print!("{}", bench_table(&timed, &baselines));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        eprintln!("wrote {} rows to {}", rows.len(), path.display());
    }
    if let (true, Some((path, mut table)), Some(dir)) = (args.record, table, &args.champions) {
        let bench = args
            .json
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "an unrecorded bench run (no --json)".to_string());
        record(&mut table, &rows, &problems, &bench, &args.dtype)?;
        let genomes: Vec<(String, evo_genome::Genome)> = table
            .classes
            .iter()
            .map(|c| {
                evo_genome::GenomeFile::load(&dir.join(&c.champion))
                    .map(|f| (c.name.clone(), f.genes))
            })
            .collect::<Result<_, _>>()?;
        super::champions::write_champions(dir, &table, &genomes)?;
        super::champions::write_table(&path, &table)?;
        eprintln!(
            "recorded this run's figures in {} and the champions' headers",
            path.display()
        );
    }
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r.verdict == "fail")
        .map(|r| r.kernel.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "kernels failed GREEN and were not timed: {}",
            failed.join(", ")
        );
    }
    Ok(())
}

/// This run's figures into the dispatch table: each champion's median on its shape (and
/// the genome it was), every baseline's median of the same run on that shape, both again
/// on a cold L2 (with --cold-l2), and where the run is recorded. The ratios printed from
/// them are against the fastest baseline, whichever it is.
fn record(
    table: &mut evo_genome::dispatch::DispatchTable,
    rows: &[Row],
    problems: &[Problem],
    bench: &str,
    dtype: &str,
) -> anyhow::Result<()> {
    for (class, problem) in table.classes.iter_mut().zip(problems) {
        let shape = problem.label();
        let timed = |kernel: &str| {
            rows.iter()
                .find(|r| r.kernel == kernel && r.shape == shape && r.verdict == "timed")
                .filter(|r| r.median_us.is_some())
        };
        let champion = format!("champion {}", class.name);
        let Some(row) = timed(&champion) else {
            bail!(
                "champion {} was not timed on {shape} (see the log); nothing recorded",
                class.name
            );
        };
        let median = |kernel: &str| timed(kernel).and_then(|r| r.median_us);
        class.median_us = row.median_us;
        class.genome_id = row.genome_id.clone();
        class.cudnn_us = median("sdpa-cudnn");
        class.speedup_vs_cudnn = None;
        // With --cold-l2, each side launched alone after an L2 read-over as well (a
        // replay figure can flatter either side: run D10 of
        // experiments/2026-11-26-h100-decode-3).
        class.cold_us = median(&cold_name(&champion));
        class.cudnn_cold_us = median(&cold_name("sdpa-cudnn"));
        let mut backends: Vec<&str> = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.shape == shape && r.verdict == "timed")
        {
            let name = r.kernel.trim_end_matches(" (cold L2)");
            if !name.starts_with("champion ") && !backends.contains(&name) {
                backends.push(name);
            }
        }
        class.baselines = backends
            .into_iter()
            .map(|b| evo_genome::dispatch::BaselineFigure {
                backend: b.to_string(),
                us: median(b),
                cold_us: median(&cold_name(b)),
            })
            .filter(|b| b.us.is_some() || b.cold_us.is_some())
            .collect();
        class.bench = Some(format!("{bench} ({}, {dtype})", table.device));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use evo_genome::dispatch::{DispatchTable, ShapeClass};

    /// A timing row as the bench writes one.
    fn row(kernel: &str, id: Option<&str>, p: &Problem, us: f64) -> Row {
        let mut r = Row::not_run(kernel, id, "H100", p, "timed", String::new());
        r.median_us = Some(us);
        r
    }

    #[test]
    fn the_record_holds_every_baseline_and_the_genome_it_timed() {
        let spec = "16,32,1,8192,128,f16,causal=br,kv=8";
        let p: Problem = spec.parse().unwrap();
        let name = ShapeClass::name_of(&p);
        let mut table = DispatchTable {
            device: "H100".into(),
            classes: vec![ShapeClass {
                name: name.clone(),
                shape: spec.into(),
                champion: format!("{name}.toml"),
                experiment: "experiments/x".into(),
                median_us: None,
                cudnn_us: None,
                speedup_vs_cudnn: Some(1.17),
                cold_us: None,
                cudnn_cold_us: None,
                bench: None,
                genome_id: None,
                baselines: Vec::new(),
            }],
            backward: Vec::new(),
        };
        let champion = format!("champion {name}");
        let id = Some("01160e73198fb10d");
        let other: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let rows = vec![
            row(&champion, id, &p, 179.5),
            row(&cold_name(&champion), id, &p, 179.23),
            row("sdpa-cudnn", None, &p, 210.66),
            row("sdpa-cudnn (cold L2)", None, &p, 179.25),
            row("sdpa-flash", None, &p, 181.96),
            row("sdpa-flash (cold L2)", None, &p, 184.11),
            // Another shape's baseline is not this class's.
            row("sdpa-efficient", None, &other, 1.0),
        ];
        record(&mut table, &rows, &[p], "r3/record.json", "f16").unwrap();
        let c = &table.classes[0];
        assert_eq!(c.genome_id.as_deref(), id);
        assert_eq!(
            c.speedup_vs_cudnn, None,
            "no ratio against one backend is kept"
        );
        let backends: Vec<&str> = c.baselines.iter().map(|b| b.backend.as_str()).collect();
        assert_eq!(backends, ["sdpa-cudnn", "sdpa-flash"]);
        let warm = c.comparison(false).unwrap();
        assert_eq!(
            (warm.backend.as_str(), warm.backend_us),
            ("sdpa-flash", 181.96)
        );
        let cold = c.comparison(true).unwrap();
        assert_eq!(
            (cold.backend.as_str(), cold.backend_us),
            ("sdpa-cudnn", 179.25)
        );
        assert_eq!(c.bench.as_deref(), Some("r3/record.json (H100, f16)"));

        // A champion that was not timed: nothing is recorded.
        let e = record(&mut table, &rows[2..], &[p], "b.json", "f16").unwrap_err();
        assert!(e.to_string().contains("was not timed"), "{e}");
    }
}
