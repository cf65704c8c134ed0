//! `evo profile`: one launch of a kernel under Nsight Compute, summarised.
//!
//! The genome (or `.cu` file) is compiled as `evo gate` compiles it and its CUBIN saved
//! in the output folder; then ncu runs `evo profile-target`, a child that loads that
//! CUBIN, draws fresh random inputs and launches the kernel `--launch-skip` + 2 times,
//! and ncu profiles launch `--launch-skip` + 1 (the first ones warm caches and clocks).
//! The raw CSV, ncu's metric list, the CUBIN and `profile.json` stay in the folder.

use anyhow::{bail, Context};
use evo_codegen::Toolchain;
use evo_gates::compile::{compile_all, variants_for};
use evo_gates::inputs::{poison_bits, Inputs};
use evo_gates::kernel::{Draw, RepeatPlan};
use evo_gates::profile::{
    available_tensor_metrics, find_ncu, ncu_args, ncu_failure, parse_metric_names, parse_raw_csv,
    ProfileError, ProfileSummary, KERNEL,
};
use evo_gates::{AttentionKernel, Device, TimingMethod};
use evo_genome::Problem;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// The genome file to profile (or use --source).
    #[arg(required_unless_present_any = ["source", "csv"], conflicts_with = "source")]
    pub genome: Option<PathBuf>,
    /// A hand-written kernel file under kernels/ABI.md instead of a genome.
    #[arg(long, value_name = "FILE.cu")]
    pub source: Option<PathBuf>,
    /// The problem: B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT], e.g. 2,16,4096,4096,128,f16.
    #[arg(long, value_name = "SPEC", required_unless_present = "csv")]
    pub problem: Option<Problem>,
    /// Summarise a recorded ncu CSV (an earlier profile's ncu.csv) instead of profiling:
    /// no GPU or ncu needed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["genome", "source", "problem", "out"])]
    pub csv: Option<PathBuf>,
    /// Output folder (an experiment's folder, say)
    /// [default: experiments/<date>-<device>-profile-<name>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Launches before the profiled one.
    #[arg(long, default_value_t = 2)]
    pub launch_skip: u32,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 2026, env = "EVO_SEED")]
    pub seed: u64,
    /// Print profile.json on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The child ncu profiles: loads a CUBIN and launches its forward kernel.
#[derive(Debug, clap::Args)]
pub struct ProfileTargetArgs {
    #[arg(long)]
    pub cubin: PathBuf,
    #[arg(long)]
    pub name: String,
    #[arg(long)]
    pub problem: Problem,
    #[arg(long)]
    pub seed: u64,
    /// Forward launches in all (one checked, the rest back to back).
    #[arg(long)]
    pub launches: u32,
}

pub fn run(args: ProfileArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.csv {
        return resummarise(path, args.json);
    }
    let Some(problem) = args.problem else {
        bail!("--problem SPEC is needed to profile (B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT])");
    };
    let ncu = find_ncu(
        std::env::var("PATH").ok().as_deref(),
        std::env::var("CUDA_HOME").ok().as_deref(),
    )?;
    let sources = super::gate::load_sources(args.genome.as_slice(), args.source.as_slice())?;
    let source = &sources[0];
    let name = source.name().to_string();

    // The device is only read here (target, name) and closed before ncu starts.
    let (target, device_name) = {
        let device = Device::open(0).context("`evo profile` runs the kernel on a GPU")?;
        let target = super::device_target(&device)?;
        (target, device.name().to_string())
    };
    let tc = Toolchain::discover()?;
    let built = compile_all(
        &tc,
        std::slice::from_ref(source),
        &variants_for(&[problem]),
        target,
    );
    let compiled = match &built[0][0].result {
        Ok(c) => c,
        Err(e) => bail!("{name} does not build for {}: {e}", problem),
    };

    let stem = Path::new(&name)
        .file_stem()
        .map_or(name.clone(), |s| s.to_string_lossy().into_owned());
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("experiments").join(format!(
            "{}-{}-profile-{}",
            super::evolve::today(),
            super::evolve::slug(&device_name),
            super::evolve::slug(&stem)
        ))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
    let cubin = out.join(format!("{}.cubin", super::evolve::slug(&stem)));
    std::fs::write(&cubin, &compiled.cubin)
        .with_context(|| format!("{}: cannot write", cubin.display()))?;

    // ncu refuses a run naming an unknown metric, so the tensor metrics are asked for
    // only when this ncu lists them for this GPU; the list is kept for reference.
    let query = Command::new(&ncu)
        .arg("--query-metrics")
        .output()
        .with_context(|| format!("{}: cannot run", ncu.display()))?;
    let query_text = String::from_utf8_lossy(&query.stdout).into_owned();
    write(&out.join("ncu-query-metrics.txt"), &query_text)?;
    let metrics = available_tensor_metrics(&parse_metric_names(&query_text));
    if metrics.is_empty() {
        eprintln!(
            "warning: `ncu --query-metrics` lists no tensor-pipe metric ({}); the summary has none",
            String::from_utf8_lossy(&query.stderr).trim()
        );
    }

    let exe = std::env::current_exe().context("cannot locate the evo executable")?;
    let child: Vec<String> = vec![
        exe.display().to_string(),
        "profile-target".into(),
        "--cubin".into(),
        cubin.display().to_string(),
        "--name".into(),
        name.clone(),
        "--problem".into(),
        Problem::spec(&problem),
        "--seed".into(),
        args.seed.to_string(),
        "--launches".into(),
        (args.launch_skip + 2).to_string(),
    ];
    let ncu_argv = ncu_args(args.launch_skip, &metrics, &child);
    eprintln!("profiling {name} on {} with {}", problem, ncu.display());
    let run = Command::new(&ncu)
        .args(&ncu_argv)
        .output()
        .with_context(|| format!("{}: cannot run", ncu.display()))?;
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    write(&out.join("ncu.csv"), &stdout)?;
    write(
        &out.join("ncu-command.txt"),
        &format!(
            "{} {}\n",
            ncu.display(),
            ncu_argv
                .iter()
                .map(|a| if a.contains(' ') {
                    format!("'{a}'")
                } else {
                    a.clone()
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
    )?;
    if !stderr.is_empty() {
        write(&out.join("ncu-stderr.txt"), &stderr)?;
    }

    let rows = match parse_raw_csv(&stdout) {
        Ok(rows) if !rows.is_empty() => rows,
        parsed => {
            let mut message = ncu_failure(&format!("{stdout}\n{stderr}"));
            if let Err(e) = parsed {
                message += &format!(" ({e})");
            }
            if !run.status.success() {
                message += &format!(" [ncu exit status {}]", run.status);
            }
            return Err(ProfileError::NothingProfiled {
                kernel: KERNEL.into(),
                message: format!("{message}; ncu's output is in {}", out.display()),
            }
            .into());
        }
    };
    let summary = ProfileSummary::from_row(&rows[0]);
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "name": name,
        "problem": problem,
        "seed": args.seed,
        "launch_skip": args.launch_skip,
        "summary": summary,
    }))?;
    write(&out.join("profile.json"), &(json.clone() + "\n"))?;
    if args.json {
        println!("{json}");
    } else {
        println!("{name} on {}", problem);
        print!("{summary}");
    }
    eprintln!(
        "wrote profile.json, ncu.csv and the CUBIN to {}",
        out.display()
    );
    Ok(())
}

/// The summary of a recorded CSV, printed (the table, or JSON with `json`).
fn resummarise(path: &Path, json: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let rows = parse_raw_csv(&text).with_context(|| format!("{}", path.display()))?;
    let Some(row) = rows.first() else {
        bail!("{}: ncu's CSV holds no profiled launch", path.display());
    };
    let summary = ProfileSummary::from_row(row);
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{summary}");
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}

pub fn run_target(args: ProfileTargetArgs) -> anyhow::Result<()> {
    let device = Device::open(0)?;
    let tc = Toolchain::discover()?;
    evo_gates::compile::install_verifier(&tc, &device)?;
    let cubin = std::fs::read(&args.cubin)
        .with_context(|| format!("{}: cannot read", args.cubin.display()))?;
    let mut kernel = device.load_attention(&args.name, &cubin)?;
    let inputs = Inputs::random(&args.problem, args.seed, 1.0);
    // A kernel that leaves outputs unwritten is not worth a profile: say so instead.
    let out = kernel.run_once(&inputs)?;
    let poison = poison_bits(args.problem.dtype);
    let unwritten = out.o.iter().filter(|&&b| b == poison).count();
    if unwritten > 0 {
        bail!(
            "{} left {unwritten} of {} outputs unwritten on {}; run `evo gate` on it",
            args.name,
            out.o.len(),
            args.problem
        );
    }
    // One input set, drawn anew on the device before each launch (FAST's way).
    kernel.prepare_timing(&args.problem, 1)?;
    for repeat in 0..args.launches.saturating_sub(1) as u64 {
        let draw = [Draw {
            seed: args.seed.wrapping_add(1 + repeat),
            q: 0,
            k: 0,
            v: 0,
            o: 0,
        }];
        let plan = RepeatPlan {
            draws: &draw,
            keep: false,
        };
        kernel.time_repeat(&plan, TimingMethod::Events)?;
    }
    eprintln!(
        "profile-target: {} launched {} times on {}",
        args.name, args.launches, args.problem
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_problem_spec_reads_back() {
        for spec in ["2,16,4096,4096,128,f16", "1,8,77,1000,64,bf16,causal"] {
            let p: evo_genome::Problem = spec.parse().unwrap();
            assert_eq!(super::Problem::spec(&p), spec);
        }
    }
}
