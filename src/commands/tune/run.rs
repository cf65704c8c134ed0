//! The scheduler: one `evo evolve` child process per shape, one at a time per GPU.
//!
//! Each search is a child of this same binary, so a search that crashes, hangs in a
//! driver call or is killed costs its own shape only, and its experiment folder is the
//! one `evo evolve` resumes. The GPUs take shapes from one queue: a GPU that finishes
//! takes the next shape, so a long shape does not hold a fixed share of the list back.
//! Each child writes its output to `<search>.log`; the parent prints one line per shape
//! as it ends.

use anyhow::Context;
use evo_genome::Problem;
use evo_lineage::Lineage;
use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of a failed search's log shown with its failure.
const TAIL_LINES: usize = 12;

/// One shape's search as the child runs it.
#[derive(Debug, Clone)]
pub struct Job {
    /// The shape's place in the plan (from 0).
    pub index: usize,
    pub problem: Problem,
    /// The experiment folder (`OUT/searches/<name>`).
    pub experiment: PathBuf,
    pub seeds: PathBuf,
    pub log: PathBuf,
}

/// What every child is given besides its shape.
#[derive(Debug, Clone)]
pub struct ChildOptions {
    pub strategy: String,
    pub backend: String,
    /// `--budget N` or `--minutes M`.
    pub budget: Vec<String>,
    /// The guided strategy's `--model-data`.
    pub model_data: Option<PathBuf>,
    /// The tune's `--seed`: each search's seed is drawn from it and its shape.
    pub seed: Option<u64>,
    /// Each search's share of the host's cores when several run at once: its compile
    /// threads (`--compile-threads`) and its processes' other thread pools.
    pub cores: Option<usize>,
}

/// How a search ended.
#[derive(Debug, Clone)]
pub enum Ended {
    Done,
    /// Why, and the log's last lines.
    Failed(String),
}

/// A search's end, with the slot (GPU) that ran it and its wall time.
#[derive(Debug, Clone)]
pub struct Finished {
    pub job: Job,
    pub gpu: Option<u32>,
    pub wall: Duration,
    pub ended: Ended,
}

/// The search of `experiment` reached its budget: `evo evolve` writes report.md only
/// when its search returns.
pub fn is_done(experiment: &Path) -> bool {
    experiment.join("report.md").is_file() && experiment.join("lineage.json").is_file()
}

/// The evaluations a search recorded and its champion's µs, read from its folder.
pub fn summary(experiment: &Path) -> (Option<usize>, Option<f64>) {
    let evaluations = std::fs::read_to_string(experiment.join("evaluations.jsonl"))
        .ok()
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count());
    let champion = Lineage::load(&experiment.join("lineage.json"))
        .ok()
        .and_then(|l| l.champion().and_then(|c| c.score_us()));
    (evaluations, champion)
}

/// The child's command line (without the program).
pub fn child_args(job: &Job, options: &ChildOptions, gpu: Option<u32>) -> Vec<String> {
    let mut args = vec!["evolve".to_string(), "--problem".into(), job.problem.spec()];
    args.extend(options.budget.iter().cloned());
    args.extend([
        "--experiment".into(),
        job.experiment.display().to_string(),
        "--genomes".into(),
        job.seeds.display().to_string(),
        "--strategy".into(),
        options.strategy.clone(),
        "--quiet".into(),
    ]);
    if let Some(d) = &options.model_data {
        args.extend(["--model-data".into(), d.display().to_string()]);
    }
    if let Some(seed) = options.seed {
        args.extend(["--seed".into(), shape_seed(seed, &job.problem).to_string()]);
    }
    if let Some(cores) = options.cores {
        // One core of the share is its worker's, as `evo evolve` keeps one per GPU.
        let threads = cores.saturating_sub(1).max(1);
        args.extend(["--compile-threads".into(), threads.to_string()]);
    }
    if let Some(g) = gpu {
        args.extend(["--gpus".into(), g.to_string()]);
    }
    args.extend(["--backend".into(), options.backend.clone()]);
    args
}

/// The seed of `problem`'s search in a tune seeded with `seed`: the same shape gets the
/// same seed whatever its place in the list (FNV-1a over the seed and the spec).
pub fn shape_seed(seed: u64, problem: &Problem) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.to_le_bytes().iter().chain(problem.spec().as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // `evo evolve --seed` takes what a TOML integer holds.
    h >> 1
}

/// The share of this host's cores each of `slots` concurrent searches gets; none for
/// one search, which takes them all.
pub fn core_share(slots: usize) -> Option<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (slots > 1).then(|| (cores / slots).max(1))
}

/// The costliest shapes first (by the floating-point work of one call), so that with
/// several GPUs no GPU starts a long search while the others run out of shapes.
pub fn costliest_first(jobs: &mut [Job]) {
    jobs.sort_by(|a, b| b.problem.flops().total_cmp(&a.problem.flops()));
}

/// Runs one search to its end, its output appended to its log.
fn run_one(exe: &Path, job: &Job, options: &ChildOptions, gpu: Option<u32>) -> Ended {
    let args = child_args(job, options, gpu);
    let started = (|| -> anyhow::Result<std::process::ExitStatus> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&job.log)
            .with_context(|| format!("{}: cannot open", job.log.display()))?;
        writeln!(log, "$ evo {}", args.join(" "))?;
        let err = log.try_clone()?;
        let mut command = Command::new(exe);
        if let Some(cores) = options.cores {
            command.env("RAYON_NUM_THREADS", cores.to_string());
        }
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .status()
            .with_context(|| format!("cannot start {}", exe.display()))
    })();
    match started {
        Ok(status) if status.success() && is_done(&job.experiment) => Ended::Done,
        Ok(status) => Ended::Failed(format!(
            "`evo evolve` {}; the last lines of {}:\n{}",
            match status.code() {
                Some(0) => "ended without a report".to_string(),
                Some(c) => format!("exited with {c}"),
                None => "was killed by a signal".to_string(),
            },
            job.log.display(),
            tail(&job.log, TAIL_LINES)
        )),
        Err(e) => Ended::Failed(format!("{e:#}")),
    }
}

/// The last `n` lines of a file, indented.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `jobs` with one child at a time per slot (`None`: evolve's own default GPU, or
/// replay), each slot taking the next job when its last one ends; `report` is called
/// on this thread as each job ends, in the order they end.
pub fn run_all(
    exe: &Path,
    jobs: Vec<Job>,
    slots: &[Option<u32>],
    options: &ChildOptions,
    mut report: impl FnMut(&Finished),
) -> Vec<Finished> {
    let queue = Arc::new(Mutex::new(VecDeque::from(jobs)));
    let (send, receive) = mpsc::channel::<Finished>();
    let workers: Vec<_> = slots
        .iter()
        .map(|&gpu| {
            let queue = Arc::clone(&queue);
            let send = send.clone();
            let exe = exe.to_path_buf();
            let options = options.clone();
            std::thread::spawn(move || loop {
                let next = queue.lock().map(|mut q| q.pop_front()).unwrap_or(None);
                let Some(job) = next else { break };
                let start = Instant::now();
                let ended = run_one(&exe, &job, &options, gpu);
                let done = Finished {
                    job,
                    gpu,
                    wall: start.elapsed(),
                    ended,
                };
                if send.send(done).is_err() {
                    break;
                }
            })
        })
        .collect();
    drop(send);
    let mut finished = Vec::new();
    for f in receive {
        report(&f);
        finished.push(f);
    }
    for w in workers {
        let _ = w.join();
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_is_evolve_on_its_shape_folder_and_gpu() {
        let job = Job {
            index: 0,
            problem: "1,8,512,512,64,f16".parse().unwrap(),
            experiment: PathBuf::from("out/searches/b1"),
            seeds: PathBuf::from("out/searches/b1.seeds"),
            log: PathBuf::from("out/searches/b1.log"),
        };
        let options = ChildOptions {
            strategy: "evolutionary".into(),
            backend: "gpu".into(),
            budget: vec!["--minutes".into(), "10".into()],
            model_data: None,
            seed: None,
            cores: None,
        };
        assert_eq!(
            child_args(&job, &options, Some(1)).join(" "),
            "evolve --problem 1,8,512,512,64,f16 --minutes 10 --experiment out/searches/b1 \
             --genomes out/searches/b1.seeds --strategy evolutionary --quiet --gpus 1 --backend gpu"
        );
        // A seeded tune on a shared host: the shape's own seed, its share of the cores.
        let shared = ChildOptions {
            seed: Some(7),
            cores: Some(16),
            ..options
        };
        let seed = shape_seed(7, &job.problem);
        assert!(child_args(&job, &shared, Some(1))
            .join(" ")
            .contains(&format!("--seed {seed} --compile-threads 15 --gpus 1")));
    }

    #[test]
    fn a_shape_seed_follows_the_tune_seed_and_the_shape_not_the_order() {
        let a: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let b: Problem = "1,8,512,512,64,f16,causal".parse().unwrap();
        assert_eq!(shape_seed(1, &a), shape_seed(1, &a));
        assert_ne!(shape_seed(1, &a), shape_seed(2, &a));
        assert_ne!(shape_seed(1, &a), shape_seed(1, &b));
        assert!(shape_seed(u64::MAX, &b) <= i64::MAX as u64);
    }

    #[test]
    fn the_costliest_shape_goes_first() {
        let job = |index: usize, spec: &str| Job {
            index,
            problem: spec.parse().unwrap(),
            experiment: PathBuf::from(format!("s{index}")),
            seeds: PathBuf::from(format!("s{index}.seeds")),
            log: PathBuf::from(format!("s{index}.log")),
        };
        let mut jobs = vec![
            job(0, "1,8,512,512,64,f16"),
            job(1, "1,32,4096,4096,128,f16,causal,kv=8"),
            job(2, "1,16,2048,2048,256,f16,causal,kv=8"),
        ];
        costliest_first(&mut jobs);
        let order: Vec<usize> = jobs.iter().map(|j| j.index).collect();
        assert_eq!(order, [1, 2, 0]);
    }

    #[test]
    fn a_queue_keeps_every_slot_busy_and_reports_failures() {
        // `true` and `false` stand in for the binary: every job ends, none reaches a
        // report, so each is a failure naming its log.
        let dir = tempfile::tempdir().unwrap();
        let jobs: Vec<Job> = (0..5)
            .map(|i| Job {
                index: i,
                problem: "1,8,512,512,64,f16".parse().unwrap(),
                experiment: dir.path().join(format!("s{i}")),
                seeds: dir.path().join(format!("s{i}.seeds")),
                log: dir.path().join(format!("s{i}.log")),
            })
            .collect();
        let options = ChildOptions {
            strategy: "evolutionary".into(),
            backend: "auto".into(),
            budget: Vec::new(),
            model_data: None,
            seed: None,
            cores: None,
        };
        let mut seen = 0;
        let done = run_all(
            Path::new("true"),
            jobs,
            &[Some(0), Some(1)],
            &options,
            |_| seen += 1,
        );
        assert_eq!((done.len(), seen), (5, 5));
        let mut indices: Vec<usize> = done.iter().map(|f| f.job.index).collect();
        indices.sort();
        assert_eq!(indices, [0, 1, 2, 3, 4]);
        for f in &done {
            let Ended::Failed(why) = &f.ended else {
                panic!("no report, so not done")
            };
            assert!(
                why.contains("ended without a report") && why.contains(".log"),
                "{why}"
            );
            let log = std::fs::read_to_string(&f.job.log).unwrap();
            assert!(log.starts_with("$ evo evolve --problem"), "{log}");
        }
    }
}
