//! The worker protocol on the CPU: stand-in workers (shell scripts) that answer,
//! die mid-evaluation, or hang, so isolation is tested without a GPU.

use super::*;
use crate::child::Worker;
use crate::gpus::pin;
use evo_codegen::Toolchain;
use evo_gates::{Evaluation, Status};
use evo_genome::{Genome, Problem, Target};
use evo_mutator::Evaluator;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;

mod compile;
mod confirm;
mod steady;

fn request() -> WorkerRequest {
    WorkerRequest {
        name: "t".into(),
        genome: Genome::baseline(),
        variants: Vec::new(),
        resources: None,
        green_cases: Vec::new(),
        objective: vec![Problem::seed()],
        seed: 1,
        confirm: false,
        full_gate: Vec::new(),
    }
}

fn answer() -> Evaluation {
    Evaluation {
        score_us: Some(12.5),
        ..Evaluation::failed(Genome::baseline(), "stand-in GPU", Status::Ok, "")
    }
}

/// A runner whose worker is `sh -c SCRIPT`; the script has greeted already.
fn runner(script: &str, timeout: Duration) -> Runner {
    let hello = serde_json::to_string(&Hello::Ready {
        device: "stand-in GPU".into(),
        target: Some(Target::Sm90),
    })
    .unwrap();
    let command = WorkerCommand {
        program: "sh".into(),
        args: vec!["-c".into(), format!("echo '{hello}'; {script}")],
        env: Vec::new(),
    };
    let (worker, _) = Worker::spawn(&command).unwrap();
    Runner {
        gpu: 0,
        command,
        device: "stand-in GPU".into(),
        seed: 0,
        timeout,
        worker: Some(worker),
        evaluated: 0,
        best: Default::default(),
        late: None,
        usage: GpuUse::default(),
    }
}

#[test]
fn an_answering_worker_returns_its_evaluation() {
    let json = serde_json::to_string(&answer()).unwrap();
    let mut r = runner(
        &format!("while read line; do echo '{json}'; done"),
        Duration::from_secs(20),
    );
    let eval = r.ask(&request());
    assert_eq!(eval.status, Status::Ok);
    assert_eq!(eval.score_us, Some(12.5));
    assert!(r.worker.is_some(), "a healthy worker is kept");
}

#[test]
fn a_worker_that_dies_is_recorded_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("died-once");
    let json = serde_json::to_string(&answer()).unwrap();
    // First worker dies on its first candidate; the replacement answers.
    let script = format!(
        "while read line; do if [ -f {s} ]; then echo '{json}'; else touch {s}; exit 3; fi; done",
        s = state.display()
    );
    let mut r = runner(&script, Duration::from_secs(20));
    let first = r.ask(&request());
    assert_eq!(first.status, Status::RuntimeFailed, "{}", first.detail);
    assert!(first.detail.contains("died"), "{}", first.detail);
    let second = r.ask(&request());
    assert_eq!(second.status, Status::Ok, "{}", second.detail);
}

#[test]
fn a_hanging_worker_is_killed_at_the_timeout() {
    let mut r = runner("read line; sleep 60", Duration::from_millis(700));
    let start = std::time::Instant::now();
    let eval = r.ask(&request());
    assert_eq!(eval.status, Status::Timeout);
    assert!(
        eval.detail.contains("no answer within 1 s")
            && eval.detail.contains("the worker was killed"),
        "{}",
        eval.detail
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(r.worker.is_none(), "the hung worker was dropped (killed)");
}

#[test]
fn an_unreadable_answer_is_a_runtime_failure() {
    let mut r = runner("read line; echo 'not json'", Duration::from_secs(20));
    let eval = r.ask(&request());
    assert_eq!(eval.status, Status::RuntimeFailed);
    assert!(eval.detail.contains("unreadable"), "{}", eval.detail);
}

#[test]
fn a_runtime_failure_answer_retires_the_worker() {
    let failed = Evaluation::failed(
        Genome::baseline(),
        "stand-in GPU",
        Status::RuntimeFailed,
        "illegal address",
    );
    let json = serde_json::to_string(&failed).unwrap();
    let mut r = runner(
        &format!("while read line; do echo '{json}'; done"),
        Duration::from_secs(20),
    );
    assert_eq!(r.ask(&request()).status, Status::RuntimeFailed);
    assert!(
        r.worker.is_none(),
        "a possibly poisoned context is not reused"
    );
}

#[test]
fn a_new_best_is_retimed_before_it_is_crowned() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("requests");
    let json = serde_json::to_string(&answer()).unwrap();
    let script = format!(
        "while read line; do echo x >> {c}; echo '{json}'; done",
        c = count.display()
    );
    let mut r = runner(&script, Duration::from_secs(20));
    let first = r.run_prepared(vec![Prepared::Run(request())], &mut |_| {});
    assert!(
        first[0].detail.contains("re-timed before crowning"),
        "{}",
        first[0].detail
    );
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
    // Not faster than the confirmed best: no second timing.
    let mut seen = 0;
    r.run_prepared(vec![Prepared::Run(request())], &mut |_| seen += 1);
    assert_eq!(seen, 1, "each evaluation is handed over as it completes");
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 3);
}

/// A stand-in worker command: greets as `other GPU` when pinned to GPU 7, else as
/// `stand-in GPU`, logs `start GPU` when it starts, then runs `script`.
fn stand_in(dir: &Path, script: &str) -> WorkerCommand {
    let hello = |device: &str| {
        serde_json::to_string(&Hello::Ready {
            device: device.into(),
            target: Some(Target::Sm90),
        })
        .unwrap()
    };
    WorkerCommand {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!(
                "echo \"start $CUDA_VISIBLE_DEVICES\" >> {log}; \
                 if [ \"$CUDA_VISIBLE_DEVICES\" = 7 ]; then echo '{other}'; else echo '{same}'; fi; {script}",
                log = dir.join("starts").display(),
                other = hello("other GPU"),
                same = hello("stand-in GPU"),
            ),
        ],
        env: Vec::new(),
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_pool_runs_a_batch_on_every_gpu_and_records_which() {
    let dir = tempfile::tempdir().unwrap();
    let json = serde_json::to_string(&answer()).unwrap();
    let script = format!(
        "while read line; do echo \"$CUDA_VISIBLE_DEVICES\" >> {log}; sleep 0.2; echo '{json}'; done",
        log = dir.path().join("requests").display()
    );
    let command = stand_in(dir.path(), &script);
    let (mut pool, device, _) =
        RunnerPool::start(&command, Some(&[0, 1]), 0, Duration::from_secs(20)).unwrap();
    assert_eq!(device, "stand-in GPU");
    assert_eq!(pool.gpus(), [0, 1]);
    let batch = (0..6).map(|_| Prepared::Run(request())).collect();
    let mut handed = 0;
    let evals = pool.run_prepared(batch, &mut |_| handed += 1);
    assert_eq!((evals.len(), handed), (6, 6));
    assert!(evals.iter().all(|e| e.status == Status::Ok));
    let on = |g| evals.iter().filter(|e| e.device_index == Some(g)).count();
    assert_eq!(on(0) + on(1), 6);
    assert!(
        on(0) > 0 && on(1) > 0,
        "one GPU ran nothing: {} / {}",
        on(0),
        on(1)
    );
    // Each worker saw only its own GPU.
    let requests = lines_of(&dir.path().join("requests"));
    assert!(
        requests.iter().all(|l| l == "0" || l == "1"),
        "{requests:?}"
    );
    let mut starts = lines_of(&dir.path().join("starts"));
    starts.sort();
    assert_eq!(starts, ["start 0", "start 1"]);
    // Each GPU's time: its answers took 0.2 s each, all inside its span.
    for u in pool.usage() {
        // Its candidates and the confirmation of its first new best.
        assert_eq!(u.answers as usize, on(u.gpu) + 1, "{u:?}");
        assert!(
            u.busy >= Duration::from_millis(200) * u.answers as u32,
            "{u:?}"
        );
        assert!(u.span >= u.busy && u.late_compile.is_zero(), "{u:?}");
        // One of its answers was that confirmation, and its time is part of the busy.
        assert_eq!(u.confirmations, 1, "{u:?}");
        assert!(
            u.confirming >= Duration::from_millis(200) && u.confirming <= u.busy,
            "{u:?}"
        );
        assert!(u.line().starts_with(&format!("GPU {}: worker busy", u.gpu)));
        assert!(
            u.line()
                .contains("1 of them new bests' confirmations taking"),
            "{}",
            u.line()
        );
    }
}

/// Candidates that arrive slower than the GPU answers show up as waiting time.
#[test]
fn time_spent_waiting_for_compiled_candidates_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let json = serde_json::to_string(&answer()).unwrap();
    let command = stand_in(
        dir.path(),
        &format!("while read line; do sleep 0.05; echo '{json}'; done"),
    );
    let (mut pool, _, _) =
        RunnerPool::start(&command, Some(&[0]), 0, Duration::from_secs(20)).unwrap();
    let (tx, rx) = mpsc::channel();
    let feeder = std::thread::spawn(move || {
        for i in 0..4 {
            // A candidate compiled every 0.3 s.
            std::thread::sleep(Duration::from_millis(300));
            tx.send((i, Prepared::Run(request()))).unwrap();
        }
    });
    let evals = pool.run_stream(rx, 4, &mut |_| {});
    feeder.join().unwrap();
    assert_eq!(evals.len(), 4);
    let u = pool.usage()[0];
    assert_eq!(
        u.answers, 5,
        "4 candidates and the first one's confirmation"
    );
    // Three gaps of about 0.25 s between answers of about 0.05 s.
    assert!(u.waiting() >= Duration::from_millis(600), "{}", u.line());
    assert!(u.busy < u.waiting(), "{}", u.line());
}

#[test]
fn gpus_of_two_models_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let command = stand_in(dir.path(), "cat > /dev/null");
    let err = RunnerPool::start(&command, Some(&[0, 7]), 0, Duration::from_secs(20))
        .err()
        .expect("two models are refused");
    let message = err.to_string();
    assert!(
        message.contains("one search runs on one GPU model")
            && message.contains("GPU 0: stand-in GPU")
            && message.contains("GPU 7: other GPU"),
        "{message}"
    );
}

#[test]
fn a_dead_worker_is_replaced_on_its_own_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let json = serde_json::to_string(&answer()).unwrap();
    // The first worker on GPU 1 dies on its first candidate.
    let script = format!(
        "while read line; do if [ \"$CUDA_VISIBLE_DEVICES\" = 1 ] && [ ! -f {s} ]; then touch {s}; exit 3; fi; sleep 0.2; echo '{json}'; done",
        s = dir.path().join("died").display()
    );
    let command = stand_in(dir.path(), &script);
    let (mut pool, _, _) =
        RunnerPool::start(&command, Some(&[0, 1]), 0, Duration::from_secs(20)).unwrap();
    let batch = (0..6).map(|_| Prepared::Run(request())).collect();
    let evals = pool.run_prepared(batch, &mut |_| {});
    let died: Vec<&Evaluation> = evals
        .iter()
        .filter(|e| e.status == Status::RuntimeFailed)
        .collect();
    assert_eq!(died.len(), 1, "{evals:?}");
    assert_eq!(died[0].device_index, Some(1));
    assert!(died[0].detail.contains("died"), "{}", died[0].detail);
    let mut starts = lines_of(&dir.path().join("starts"));
    starts.sort();
    assert_eq!(starts, ["start 0", "start 1", "start 1"]);
}

#[test]
fn gpu_ordinals_count_within_the_schedulers_list() {
    assert_eq!(pin(None, 1).unwrap(), "1");
    assert_eq!(pin(Some("2,5"), 1).unwrap(), "5");
    let err = pin(Some("2,5"), 2).unwrap_err().to_string();
    assert!(
        err.contains("CUDA_VISIBLE_DEVICES=2,5 shows 2 GPU(s)"),
        "{err}"
    );
    assert_eq!(parse_gpus("0, 1").unwrap(), [0, 1]);
    assert!(parse_gpus("0,0")
        .unwrap_err()
        .to_string()
        .contains("named twice"));
    assert!(parse_gpus("first")
        .unwrap_err()
        .to_string()
        .contains("`first` is not a GPU ordinal"));
}

#[test]
fn chosen_gpus_take_each_candidate_as_soon_as_it_is_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let json = serde_json::to_string(&answer()).unwrap();
    let script = format!("while read line; do sleep 0.1; echo '{json}'; done");
    let command = stand_in(dir.path(), &script);
    let (runner, device, target) =
        RunnerPool::start(&command, Some(&[0, 1]), 0, Duration::from_secs(20)).unwrap();
    assert_eq!(runner.gpus(), vec![0, 1]);
    let mut evaluator = evaluator_of(runner, plan(dir.path(), None), device, target);
    let batch = named(&["champion-h100-seed", "fa2", "v7a", "phase6", "v6a", "v5"]);
    let mut handed = 0;
    let evals = evaluator
        .evaluate_each(&batch, &mut |_| handed += 1)
        .unwrap();
    assert_eq!((evals.len(), handed), (6, 6));
    let on = |g| evals.iter().filter(|e| e.device_index == Some(g)).count();
    assert!(
        on(0) > 0 && on(1) > 0,
        "one GPU ran nothing: {} / {}",
        on(0),
        on(1)
    );
    assert_eq!(
        on(0) + on(1),
        6,
        "every candidate compiled and ran: {evals:?}"
    );
    assert!(evaluator
        .describe()
        .contains("2 child workers, one per GPU (0,1)"));
}

/// The plan of the stand-in tests: the seed shape's objective, no GREEN case, CUBINs
/// written to `cubins`.
fn plan(cubins: &Path, cache: Option<&Path>) -> GpuPlan {
    GpuPlan {
        green_cases: Vec::new(),
        full_gate: Vec::new(),
        objective: vec![Problem::seed()],
        seed: 0,
        timeout: Duration::from_secs(20),
        cubin_dir: cubins.to_path_buf(),
        cubin_cache: cache.map(Path::to_path_buf),
        compile_threads: None,
        plant: None,
    }
}

/// A GPU evaluator over stand-in workers, compiling with the real NVRTC.
fn evaluator_of(
    runner: RunnerPool,
    plan: GpuPlan,
    device: String,
    target: Option<Target>,
) -> GpuEvaluator {
    let gpus = runner.gpus().len();
    let compiler = BatchCompiler::new(
        plan,
        Toolchain::discover().expect("NVRTC (run `just nvrtc`)"),
        device,
        target.unwrap(),
        gpus,
        None,
    );
    GpuEvaluator::new(runner, compiler)
}

fn named(names: &[&str]) -> Vec<Genome> {
    names
        .iter()
        .map(|n| {
            evo_genome::GenomeFile::load(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../genomes/{n}.toml")),
            )
            .unwrap()
            .genes
        })
        .collect()
}

fn cubins_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "cubin")
        })
        .count()
}

/// A pipelined search announces its next batch: it compiles in the background before
/// it is asked for, then runs from what was compiled; an announced batch that is not
/// asked for after all leaves no CUBIN behind.
#[test]
fn a_batch_announced_ahead_compiles_before_it_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let cubins = dir.path().join("cubins");
    std::fs::create_dir_all(&cubins).unwrap();
    let json = serde_json::to_string(&answer()).unwrap();
    let requests = dir.path().join("requests");
    let script = format!(
        "while read line; do echo \"$line\" >> {}; echo '{json}'; done",
        requests.display()
    );
    let (runner, device, target) = RunnerPool::start(
        &stand_in(dir.path(), &script),
        Some(&[0]),
        0,
        Duration::from_secs(20),
    )
    .unwrap();
    let mut evaluator = evaluator_of(runner, plan(&cubins, None), device, target);
    // The search's order: batch k + 1 is announced before batch k is asked for.
    let (b0, b1, b2, b3) = (
        named(&["v3"]),
        named(&["fa2", "v6a"]),
        named(&["v5", "champion-h100-seed"]),
        named(&["phase6"]),
    );
    evaluator.prefetch(&b1);
    // b1 compiles with no evaluate call: in the background.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while cubins_in(&cubins) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing compiled ahead"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Asking for another batch meanwhile leaves b1 announced.
    assert_eq!(evaluator.evaluate_each(&b0, &mut |_| {}).unwrap().len(), 1);
    assert_eq!(evaluator.ahead.len(), 1);
    evaluator.prefetch(&b2);
    assert_eq!(evaluator.evaluate_each(&b1, &mut |_| {}).unwrap().len(), 2);
    assert_eq!(evaluator.ahead.len(), 1, "b2 stays announced");
    let asked = lines_of(&requests).join("\n");
    for g in b0.iter().chain(&b1) {
        assert!(asked.contains(&g.id().to_string()), "{asked}");
    }
    // b2 is never asked for: b3 runs, and b2's CUBINs go when the evaluator does.
    assert_eq!(evaluator.evaluate_each(&b3, &mut |_| {}).unwrap().len(), 1);
    assert!(lines_of(&requests)
        .last()
        .unwrap()
        .contains(&b3[0].id().to_string()));
    drop(evaluator);
    assert_eq!(cubins_in(&cubins), 0, "CUBINs left behind");
}
