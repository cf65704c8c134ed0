//! The backend a search runs on: the GPU evaluator (compiles here, gates and times in a
//! child worker per GPU) or the replay of a recorded landscape, with the space and the
//! objective each implies.

use super::EvolveArgs;
use anyhow::{bail, Context};
use evo_gates::suite::{full_cases, screen_cases};
use evo_gates::GreenSuite;
use evo_genome::{Problem, Target};
use evo_mutator::{
    Backend, Evaluator, ExperimentConfig, Landscape, LandscapeEvaluator, SearchSpace,
};
use evo_worker::{parse_gpus, CubinCache, GpuEvaluator, GpuPlan, Plant};
use std::path::PathBuf;
use std::time::Duration;

/// The GPU backend: compiles each generation in parallel here and runs GREEN (the
/// quick suite at the objective's head dims and dtypes, so a candidate is compiled only
/// at the variants FAST times; a new best takes the full gate at every one before it is
/// crowned) and FAST in a child worker
/// (see the evo-worker crate). The target is the GPU's own, whatever the config guessed.
/// The search's seed draws the full gate's shapes and bases GREEN's input seeds.
fn gpu_evaluator(
    seed: u64,
    objective: &[Problem],
    plant_faults: Option<usize>,
    timeout: Duration,
    gpus: Option<&[u32]>,
    cubin_cache: Option<PathBuf>,
    compile_threads: Option<usize>,
) -> anyhow::Result<(Box<dyn Evaluator>, Target)> {
    let plant = match plant_faults {
        None => None,
        Some(every) => Some(Plant {
            every,
            kernels: ["tests/faults/illegal_address.cu", "tests/faults/hang.cu"]
                .into_iter()
                .map(|p| {
                    std::fs::read_to_string(p)
                        .map(|text| (p.to_string(), text))
                        .with_context(|| format!("{p}: the fault drill's planted kernel"))
                })
                .collect::<anyhow::Result<_>>()?,
        }),
    };
    let evaluator = GpuEvaluator::start_on(
        GpuPlan {
            green_cases: screen_cases(GreenSuite::Quick.cases(), objective),
            full_gate: full_cases(GreenSuite::Default.cases(), seed),
            objective: objective.to_vec(),
            seed,
            timeout,
            cubin_dir: std::env::temp_dir().join(format!("evo-cubins-{}", std::process::id())),
            cubin_cache,
            compile_threads,
            plant,
        },
        gpus,
    )?;
    let target = evaluator.target();
    Ok((Box::new(evaluator), target))
}

/// How long the worker may take over one candidate when `--timeout` is not given: 60 s,
/// plus 30 s per GiB of the largest objective's Q, K, V and O (FAST draws fresh inputs
/// for, and checks, every timed launch: a decode batch's gigabytes of K and V cost
/// seconds a candidate) and 4 s per TFLOP of its work (the device reference of each
/// check). At the seed shape it is 60 s; at B64 H32/8 Lq1 Lk32768 D128, 300 s.
pub(crate) fn default_timeout(objective: &[Problem]) -> Duration {
    const GIB: f64 = (1u64 << 30) as f64;
    let extra = objective
        .iter()
        .map(|p| {
            let bytes = 2.0 * (2 * p.q_elems() + 2 * p.kv_elems()) as f64;
            30.0 * bytes / GIB + 4.0 * p.flops() / 1e12
        })
        .fold(0.0, f64::max);
    Duration::from_secs(60 + extra.round() as u64)
}

/// True when `--backend` (default `auto`) will search on a GPU.
pub(crate) fn on_gpu(backend: Option<&str>) -> bool {
    match backend.map(Backend::parse) {
        Some(Some(Backend::Gpu)) => true,
        None | Some(Some(Backend::Auto)) => cuda_device_present(),
        _ => false,
    }
}

/// True when the NVIDIA driver reports at least one GPU. Only chooses the `auto`
/// backend; the GPU evaluator itself checks the device properly.
fn cuda_device_present() -> bool {
    std::fs::read_dir("/proc/driver/nvidia/gpus").is_ok_and(|mut d| d.next().is_some())
}

/// The evaluator, the space and the objective for a backend; prints the first line.
pub(super) struct Prepared {
    pub(super) evaluator: Box<dyn Evaluator>,
    pub(super) space: SearchSpace,
    /// One shape, or a suite scored by the geometric mean of its medians.
    pub(super) objective: Vec<Problem>,
    /// The measurements are a recorded landscape's, not this machine's.
    pub(super) replayed: bool,
}

/// The objective as cache keys and reports name it.
pub(super) fn objective_label(objective: &[Problem]) -> String {
    match objective {
        [one] => one.label(),
        many => format!(
            "geomean of {} shapes: {}",
            many.len(),
            many.iter()
                .map(Problem::label)
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

pub(super) fn prepare(
    config: &ExperimentConfig,
    backend: Backend,
    args: &EvolveArgs,
) -> anyhow::Result<Prepared> {
    let default_landscape = args.landscape.as_path();
    let backend = match backend {
        Backend::Auto if cuda_device_present() => Backend::Gpu,
        Backend::Auto => {
            if !default_landscape
                .join(evo_mutator::landscape::META_FILE)
                .exists()
            {
                bail!(
                    "no CUDA device here and no recorded landscape at {}; record one on a GPU with `evo landscape`, or pass --backend replay:DIR",
                    default_landscape.display()
                );
            }
            Backend::Replay(default_landscape.to_path_buf())
        }
        b => b,
    };
    match backend {
        Backend::Replay(dir) => {
            if args.plant_faults.is_some() {
                bail!("--plant-faults is a drill of the GPU worker; replay runs no kernel");
            }
            if args.gpus.is_some() {
                bail!("--gpus chooses the GPUs of the GPU backend; replay runs on none");
            }
            if !config.suite.is_empty() {
                bail!("a suite objective needs the GPU backend; a landscape answers only its own shape");
            }
            let landscape = Landscape::load(&dir)?;
            if landscape.meta.subspace.base.pass() != config.pass {
                bail!(
                    "{}: a landscape of {} kernels; this is a {} search, which only a \
                     landscape of its own pass can replay (record one with `evo landscape` \
                     on a GPU)",
                    dir.display(),
                    landscape.meta.subspace.base.pass(),
                    config.pass
                );
            }
            println!("{}", landscape.banner());
            for w in &landscape.warnings {
                eprintln!("warning: {w}");
            }
            let problem = landscape.meta.problem;
            if let Some(p) = config.problem.filter(|p| *p != problem) {
                bail!(
                    "experiment.toml asks for {p}, but the landscape at {} was recorded for {problem}; replay can only answer its own problem",
                    dir.display()
                );
            }
            // Replay never invents numbers: the search stays inside the recorded sub-space.
            let space = landscape.space().clone();
            Ok(Prepared {
                evaluator: Box::new(LandscapeEvaluator::new(landscape)),
                space,
                objective: vec![problem],
                replayed: true,
            })
        }
        Backend::Gpu => {
            let objective = if config.suite.is_empty() {
                vec![config.problem.unwrap_or_else(Problem::seed)]
            } else {
                config.suite.clone()
            };
            // Valid at the largest head dim of the objective means valid at every one:
            // shared memory and registers only grow with D.
            let head_dim = objective
                .iter()
                .map(|p| p.head_dim)
                .max()
                .expect("not empty");
            let gpus = args.gpus.as_deref().map(parse_gpus).transpose()?;
            let cubin_cache = match args.cubin_cache.as_deref() {
                Some("off") => None,
                Some(dir) => Some(PathBuf::from(dir)),
                None => CubinCache::default_dir(),
            };
            let (evaluator, target) = gpu_evaluator(
                config.seed,
                &objective,
                args.plant_faults,
                args.timeout
                    .map_or_else(|| default_timeout(&objective), Duration::from_secs),
                gpus.as_deref(),
                cubin_cache,
                args.compile_threads,
            )?;
            if let Some(asked) = config.target.filter(|t| *t != target) {
                bail!("experiment.toml asks for target {asked}, but this GPU is {target}");
            }
            println!("{}", evaluator.describe());
            let space = match &config.subspace {
                Some(sub) => SearchSpace::sub(sub, head_dim, target)?,
                None => SearchSpace::full_for_pass(config.pass, head_dim, target),
            };
            Ok(Prepared {
                evaluator,
                space,
                objective,
                replayed: false,
            })
        }
        Backend::Auto => unreachable!("resolved above"),
    }
}

#[cfg(test)]
mod tests {
    use super::default_timeout;
    use evo_genome::Problem;
    use std::time::Duration;

    #[test]
    fn the_default_timeout_grows_with_the_objective() {
        let at = |spec: &str| default_timeout(&[spec.parse::<Problem>().unwrap()]);
        assert_eq!(at("1,8,512,512,64,f16"), Duration::from_secs(60));
        // 8 GiB of K and V: every candidate there once ran past 60 s in FAST.
        assert_eq!(
            at("64,32,1,32768,128,f16,causal=br,kv=8"),
            Duration::from_secs(300)
        );
        // A 32k prefill: 0.6 GiB, 8.8 TFLOP.
        let prefill = at("1,32,32768,32768,128,f16,causal,kv=8");
        assert!(prefill > Duration::from_secs(100) && prefill < Duration::from_secs(120));
        // The largest of several objectives decides.
        let both = default_timeout(&[
            "1,8,512,512,64,f16".parse().unwrap(),
            "64,32,1,32768,128,f16,causal=br,kv=8".parse().unwrap(),
        ]);
        assert_eq!(both, Duration::from_secs(300));
    }
}
