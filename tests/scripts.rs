//! The scripts the README shows, run on the CPU: export_check.py's own checks (its plan
//! of every class, its verdicts on canned timings, its refusals), check_verdicts.py on
//! a kernel with no expected verdict, landscape_summary.py on the recorded landscape,
//! bench_best.py on the recorded bench, worker_gaps.py on a worker log and the SDPA
//! backward baseline's own checks. Their GPU halves run in `just gpu-test`.

use crate::util::{repo_root, stderr, stdout};
use std::process::{Command, Output};

fn python(args: &[&str]) -> Output {
    Command::new("python3")
        .args(args)
        .current_dir(repo_root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs")
}

/// Runs a script's own checks (scripts/test_*.py), which print "ok" last when all pass.
fn assert_script_passes(script: &str) {
    let o = python(&[script]);
    assert!(
        o.status.success() && stdout(&o).trim_end().ends_with("ok"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// scripts/test_export_check.py: every class of the recorded table on its own problem
/// and champion, the bench figures, the speed verdict and the report on canned timings.
#[test]
fn export_check_runs_every_class_on_its_problem_and_judges_honestly() {
    assert_script_passes("scripts/test_export_check.py");
}

/// scripts/test_sdpa_backward_baseline.py: the backward baseline's options (those
/// `evo bench` passes), its 2.5x FLOP count, input sets, refusal of masks is_causal cannot
/// state, the binding of op arguments by schema name and a row's JSON keys; no torch.
#[test]
fn sdpa_backward_baseline_checks_pass_without_torch() {
    assert_script_passes("scripts/test_sdpa_backward_baseline.py");
}

/// A kernel in the folder, or named by the rows, with no expected-verdict file is BAD:
/// it is judged, not skipped.
#[test]
fn check_verdicts_fails_a_kernel_without_an_expected_verdict() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["naive.cu", "naive.expected.toml"] {
        std::fs::copy(
            repo_root().join("tests/kernels").join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join("new_cheat.cu"),
        "// no expected verdict yet\n",
    )
    .unwrap();
    let row = |kernel: &str, verdict: &str, median: Option<f64>| {
        serde_json::json!({
            "kernel": format!("tests/kernels/{kernel}.cu"),
            "verdict": verdict,
            "reason": null,
            "median_us": median,
        })
    };
    let json = dir.path().join("gate.json");
    let write = |rows: Vec<serde_json::Value>| {
        std::fs::write(&json, serde_json::to_string(&rows).unwrap()).unwrap();
    };
    let judge = || {
        python(&[
            "scripts/check_verdicts.py",
            json.to_str().unwrap(),
            dir.path().to_str().unwrap(),
        ])
    };
    let naive = vec![
        row("naive", "pass", None),
        row("naive", "timed", Some(900.0)),
    ];

    // The .cu in the folder, though the rows never name it.
    write(naive.clone());
    let o = judge();
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    assert!(text.contains("ok   naive: got pass"), "{text}");
    assert!(
        text.contains("BAD  new_cheat: no expected verdict: write")
            && text.contains("new_cheat.expected.toml"),
        "{text}"
    );

    // A kernel the rows name that is not in the folder at all.
    std::fs::remove_file(dir.path().join("new_cheat.cu")).unwrap();
    let mut rows = naive.clone();
    rows.push(row("elsewhere", "pass", None));
    write(rows);
    let o = judge();
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("BAD  elsewhere: no expected verdict"),
        "{}",
        stdout(&o)
    );

    // Every kernel with its file: passes.
    write(naive);
    let o = judge();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));

    // Rows that are not `evo gate --json` rows: one line naming the file, no traceback.
    std::fs::write(&json, "{\"kernel\": 1}").unwrap();
    let o = judge();
    assert!(
        !o.status.success()
            && stderr(&o).contains("gate.json: not a list of rows")
            && !stderr(&o).contains("Traceback"),
        "{}",
        stderr(&o)
    );
}

/// The README's landscape command on the recorded two-family landscape: the counts and
/// the Hopper optimum it quotes.
#[test]
fn landscape_summary_reads_the_recorded_landscape() {
    let o = python(&[
        "scripts/landscape_summary.py",
        "experiments/2026-11-23-h100-landscape/evaluations.jsonl.gz",
        "--top",
        "1",
    ]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert!(
        text.contains("10560 genomes passed GREEN and FAST"),
        "{text}"
    );
    assert!(text.contains("ampere: 7680 genomes"), "{text}");
    assert!(
        text.contains("hopper: 2880 genomes, fastest 6.71 µs"),
        "{text}"
    );
}

/// worker_gaps.py on a log as `EVO_LOG=evo_worker=debug` writes it: tracing's target is
/// the module path (`evo_worker::runner`), colours included when stderr is a terminal.
#[test]
fn worker_gaps_sums_a_worker_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("evolve.log");
    std::fs::write(
        &log,
        "2026-11-26T10:00:01.000000Z DEBUG evo_worker::runner: worker answered candidate=\"aa\" ms=1000.0\n\
         2026-11-26T10:00:01.500000Z  INFO evo::search: generation 1\n\
         \x1b[2m2026-11-26T10:00:04.000000Z\x1b[0m \x1b[34mDEBUG\x1b[0m \x1b[2mevo_worker::runner\x1b[0m\x1b[2m:\x1b[0m worker answered \x1b[3mcandidate\x1b[0m\x1b[2m=\x1b[0m\"bb\" \x1b[3mms\x1b[0m\x1b[2m=\x1b[0m2000.0\n\
         2026-11-26T10:00:06.000000Z DEBUG evo_worker::runner: worker answered candidate=\"bb\" ms=1000.0\n",
    )
    .unwrap();
    let o = python(&["scripts/worker_gaps.py", log.to_str().unwrap()]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    // Busy 1 + 2 + 1 s of the 6 s from the first request (10:00:00) to the last answer;
    // the gaps: 1 s before a new candidate, 1 s before bb's confirmation.
    assert!(
        text.contains("3 answers; worker busy 4.0 s of a 6.0 s span (67%)"),
        "{text}"
    );
    assert!(
        text.contains("2 gaps of at least 0.3 s: 1.0 s before confirmations")
            && text.contains("1.0 s before other candidates"),
        "{text}"
    );
}

/// The README's record command's second half: bench_best.py on the recorded bench gives
/// the output kept beside it, byte for byte (the README's record table is read from it).
#[test]
fn bench_best_reproduces_the_recorded_table() {
    let record = "experiments/2026-11-26-h100-decode-3/r3";
    let o = python(&[
        "scripts/bench_best.py",
        &format!("{record}/record.json"),
        "--top",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kept = std::fs::read_to_string(repo_root().join(record).join("record_best.txt")).unwrap();
    assert_eq!(stdout(&o), kept);
}
