//! New bests' confirmations in a GPU's stream: the full gate compiles while the GPU goes
//! on, and a new best that a confirmation overtook while it waited is not re-timed.

use super::*;
use std::path::PathBuf;

/// The lanes of `gpus` on stand-in workers that log each request and answer 12.5 µs
/// after 0.05 s, a confirmed best of 100 µs already on the pool's bar (so confirmations
/// wait for their full gate's compile while the GPU goes on), and a real late compiler.
/// A request whose line contains `fail_confirm` (when given) is answered with a GREEN
/// failure instead.
struct Lane {
    pool: RunnerPool,
    cubins: PathBuf,
    log: PathBuf,
    tally: Arc<CompileTally>,
}

fn lane(dir: &Path, fail_confirm: Option<&str>) -> Lane {
    lanes(dir, &[0], fail_confirm)
}

fn lanes(dir: &Path, gpus: &[u32], fail_confirm: Option<&str>) -> Lane {
    let cubins = dir.join("cubins");
    std::fs::create_dir_all(&cubins).unwrap();
    let log = dir.join("requests");
    let json = serde_json::to_string(&answer()).unwrap();
    let failed = serde_json::to_string(&Evaluation::failed(
        Genome::baseline(),
        "stand-in GPU",
        Status::GreenFailed,
        "stand-in failure",
    ))
    .unwrap();
    let script = format!(
        "while read line; do echo \"$line\" >> {log}; sleep 0.05; \
         case \"$line\" in *'{fail}'*) echo '{failed}';; *) echo '{json}';; esac; done",
        log = log.display(),
        fail = fail_confirm.unwrap_or("no request contains this"),
    );
    let (mut pool, _, _) = RunnerPool::start(
        &stand_in(dir, &script),
        Some(gpus),
        0,
        Duration::from_secs(60),
    )
    .unwrap();
    pool.runners[0].best.lower(100.0);
    let tally = Arc::new(CompileTally::new());
    let late = LateCompiler {
        toolchain: Toolchain::discover().expect("NVRTC (run `just nvrtc`)"),
        target: Target::Sm90,
        cubin_dir: cubins.clone(),
        cache: None,
        tally: tally.clone(),
    };
    for runner in &mut pool.runners {
        runner.late = Some(late.clone());
    }
    Lane {
        pool,
        cubins,
        log,
        tally,
    }
}

/// Runs `genomes` through the pool's stream in order, each a request whose full gate
/// (GREEN's quick suite) needs variants its screen lacks: real compiles.
fn run_full_gates(pool: &mut RunnerPool, genomes: Vec<Genome>) -> Vec<Evaluation> {
    let n = genomes.len();
    let (tx, rx) = mpsc::channel();
    for (i, genome) in genomes.into_iter().enumerate() {
        let request = WorkerRequest {
            genome,
            full_gate: evo_gates::GreenSuite::Quick.cases(),
            ..request()
        };
        tx.send((i, Prepared::Run(request))).unwrap();
    }
    drop(tx);
    pool.run_stream(rx, n, &mut |_| {})
}

/// A new best's full-gate variants compile on a thread of their own: the GPU goes on
/// with the next candidates meanwhile, and the confirmation runs once they are ready
/// (every new best is still confirmed, with the full gate's variants).
#[test]
fn the_gpu_goes_on_while_a_new_best_compiles_its_full_gate() {
    let dir = tempfile::tempdir().unwrap();
    let Lane {
        mut pool,
        cubins,
        log,
        tally,
    } = lane(dir.path(), None);
    // The first candidate's full gate needs two variants it lacks (a real compile);
    // the others need none.
    let fa2 = named(&["fa2"])[0];
    let first = WorkerRequest {
        genome: fa2,
        full_gate: evo_gates::GreenSuite::Quick.cases(),
        ..request()
    };
    let (tx, rx) = mpsc::channel();
    tx.send((0, Prepared::Run(first))).unwrap();
    for i in 1..4 {
        tx.send((i, Prepared::Run(request()))).unwrap();
    }
    drop(tx);
    let evals = pool.run_stream(rx, 4, &mut |_| {});
    assert_eq!(evals.len(), 4);
    assert!(
        evals[0].detail.contains("re-timed before crowning"),
        "{}",
        evals[0].detail
    );
    let lines = lines_of(&log);
    let confirms: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("\"confirm\":true"))
        .collect();
    assert!(!confirms.is_empty(), "{lines:?}");
    let fa2_confirm = confirms
        .iter()
        .copied()
        .find(|&i| lines[i].contains(&fa2.id().to_string()))
        .expect("the new best was confirmed");
    assert!(
        lines[fa2_confirm].contains("-d128-bf16.cubin"),
        "confirmed with the full gate's variants: {}",
        lines[fa2_confirm]
    );
    let screens_before = (0..fa2_confirm)
        .filter(|&i| !lines[i].contains("\"confirm\":true"))
        .count();
    assert_eq!(
        screens_before, 4,
        "every candidate was screened while the full gate compiled: {lines:?}"
    );
    assert_eq!(cubins_in(&cubins), 0, "the full gate's CUBINs are removed");
    // The late compile is in the run's compile tally: two variants, NVRTC's seconds.
    let (compiled, failed, seconds) = tally.totals();
    assert_eq!((compiled, failed), (2, 0), "{:?}", tally.line(1));
    assert!(seconds > Duration::ZERO);
}

/// New bests queued behind a confirmation are re-timed only if they still beat the best
/// confirmed by their turn: three candidates screened at 12.5 µs against a bar of 100
/// wait for the first one's full-gate compile; its confirmation lowers the bar to 12.5,
/// so the two others keep their screen as their record, and say why. Their own full
/// gates never compile: a screen as fast held the claim.
#[test]
fn a_new_best_beaten_while_it_waits_is_not_retimed() {
    let dir = tempfile::tempdir().unwrap();
    let Lane {
        mut pool,
        cubins,
        log,
        tally,
    } = lane(dir.path(), None);
    // Each full gate needs variants the screen lacks: real compiles, which the three
    // screens (0.05 s each) do not wait for.
    let evals = run_full_gates(&mut pool, named(&["fa2", "v7a", "v6a"]));
    assert!(
        evals[0].detail.contains("re-timed before crowning"),
        "{}",
        evals[0].detail
    );
    for e in &evals[1..] {
        assert_eq!(e.score_us, Some(12.5));
        assert!(
            e.detail
                .contains("not re-timed: a best confirmed while it waited is as fast"),
            "{}",
            e.detail
        );
    }
    let confirms = lines_of(&log)
        .iter()
        .filter(|l| l.contains("\"confirm\":true"))
        .count();
    assert_eq!(confirms, 1, "only the first new best was re-timed");
    let usage = pool.runners[0].usage;
    assert_eq!((usage.overtaken, usage.overtaken_uncompiled), (2, 2));
    assert!(
        usage.line().ends_with(
            "; 2 new bests overtaken before their turn (2 of them compiled no full gate)"
        ),
        "{}",
        usage.line()
    );
    let (compiled, failed, _) = tally.totals();
    assert_eq!(
        (compiled, failed),
        (2, 0),
        "only the first new best's full gate compiled: {:?}",
        tally.line(1)
    );
    assert_eq!(cubins_in(&cubins), 0, "the full gate's CUBINs are removed");
}

/// A new best that waited on a faster screen's claim compiles its own full gate when
/// that confirmation fails, and is confirmed: the claim held it back, never dropped it.
#[test]
fn a_new_best_waiting_on_a_failed_confirmation_is_confirmed_itself() {
    let dir = tempfile::tempdir().unwrap();
    let genomes = named(&["fa2", "v7a"]);
    // Only the first one's confirmation carries its full gate's CUBINs, named by its id.
    let first = genomes[0].id().to_string();
    let Lane {
        mut pool,
        log,
        tally,
        ..
    } = lane(dir.path(), Some(&format!("{first}-full")));
    let evals = run_full_gates(&mut pool, genomes);
    assert!(
        evals[0].detail.contains("failed its confirmation run"),
        "{}",
        evals[0].detail
    );
    assert!(
        evals[1].detail.contains("re-timed before crowning"),
        "{}",
        evals[1].detail
    );
    let confirms = lines_of(&log)
        .iter()
        .filter(|l| l.contains("\"confirm\":true"))
        .count();
    assert_eq!(
        confirms, 2,
        "both were re-timed, the second after the first"
    );
    let (compiled, failed, _) = tally.totals();
    assert_eq!((compiled, failed), (4, 0), "{:?}", tally.line(1));
}

/// The claim is the pool's: on two GPUs, four new bests screened alike compile one full
/// gate between them, the first one's, and the others, on either GPU, wait for its
/// confirmation and keep their screens (a lane whose stream has ended waits for the
/// other lane's claim to settle rather than compiling its own).
#[test]
fn new_bests_on_two_gpus_compile_one_full_gate_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let Lane {
        mut pool,
        cubins,
        log,
        tally,
    } = lanes(dir.path(), &[0, 1], None);
    let evals = run_full_gates(&mut pool, named(&["fa2", "v7a", "v6a", "v5"]));
    assert_eq!(evals.len(), 4);
    let confirmed = evals
        .iter()
        .filter(|e| e.detail.contains("re-timed before crowning"))
        .count();
    let kept = evals
        .iter()
        .filter(|e| e.detail.contains("not re-timed"))
        .count();
    assert_eq!((confirmed, kept), (1, 3), "{evals:#?}");
    let gpus: std::collections::HashSet<_> = evals.iter().map(|e| e.device_index).collect();
    assert_eq!(gpus.len(), 2, "both GPUs screened: {gpus:?}");
    let confirms = lines_of(&log)
        .iter()
        .filter(|l| l.contains("\"confirm\":true"))
        .count();
    assert_eq!(confirms, 1);
    let (compiled, failed, _) = tally.totals();
    assert_eq!((compiled, failed), (2, 0), "{:?}", tally.line(1));
    let uncompiled: u64 = pool.usage().iter().map(|u| u.overtaken_uncompiled).sum();
    assert_eq!(uncompiled, 3);
    assert_eq!(cubins_in(&cubins), 0);
}
