//! `evo gate` / `evo bench` from the command line, without a GPU: argument errors name
//! the fix, and a machine without a driver gets the typed "no CUDA device" error (on a
//! GPU machine the same calls run the gates and must pass).

use crate::util::{evo, repo_root, stderr, stdout};
use std::path::Path;
use std::process::{Command, Output};

#[test]
fn gate_without_kernels_says_what_to_pass() {
    let out = evo(&["gate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("nothing to gate: name genome files, --source FILE.cu, or --sample N"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn gate_names_a_missing_source_file() {
    let out = evo(
        &["gate", "--source", "tests/kernels/no_such_kernel.cu"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("tests/kernels/no_such_kernel.cu: cannot read"),
        "{}",
        stderr(&out)
    );
}

/// Backward kernels (genomes of a backward family, `.cu` files that declare `evo_pass`)
/// go to the backward gate; a list that mixes them with forward ones is refused before
/// any GPU work, naming one of each.
#[test]
fn gate_refuses_to_mix_backward_and_forward_kernels() {
    for args in [
        &[
            "gate",
            "--source",
            "tests/kernels/bwd_naive.cu",
            "--source",
            "tests/kernels/naive.cu",
        ][..],
        &[
            "gate",
            "genomes/v6a.toml",
            "--source",
            "tests/kernels/bwd_naive.cu",
        ][..],
        &[
            "gate",
            "genomes/fa2-bwd.toml",
            "--source",
            "tests/kernels/naive.cu",
        ][..],
    ] {
        let out = evo(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert!(
            e.contains("1 of the 2 kernels are backward")
                && e.contains("gate the backward and the forward kernels in separate runs"),
            "{e}"
        );
        assert!(!e.contains("no CUDA device"), "refused before the GPU: {e}");
    }
}

#[test]
fn unknown_suites_are_refused_before_any_gpu_work() {
    // `evo gate --suite` also takes a user's TOML file, so a name it does not know is
    // refused by the command (before the GPU is opened); `evo bench` only has names.
    let out = evo(&["gate", "genomes/v3.toml", "--suite", "huge"], &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--suite huge: not a suite; use `default`, `quick` or a TOML file"),
        "{}",
        stderr(&out)
    );
    let out = evo(&["bench", "genomes/v3.toml", "--suite", "huge"], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("possible values"), "{}", stderr(&out));
    // A shape of one's own: a bad spec names the flag and the form, before any device.
    let out = evo(
        &["bench", "genomes/v3.toml", "--problem", "16,32,1,8192,128"],
        &[],
    );
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("--problem") && e.contains("B,H,Lq,Lk,D,dtype"),
        "{e}"
    );
}

/// `evo bench --champions DIR --backward`: clap wants the folder, `--record` is refused
/// (the table's backward entries hold no figures) before anything is read, and on a
/// machine without a driver the table and its backward genomes load and then the typed
/// "no CUDA device" error ends it, never a panic.
#[test]
fn bench_backward_needs_champions_refuses_record_and_names_the_missing_gpu() {
    let out = evo(&["bench", "--backward"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("required arguments were not provided") && e.contains("--champions <DIR>"),
        "{e}"
    );

    let out = evo(
        &[
            "bench",
            "--champions",
            "genomes/champions/h100",
            "--backward",
            "--record",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("--record with --backward")
            && e.contains("recording backward figures into dispatch.toml is not supported"),
        "{e}"
    );
    assert!(!e.contains("no CUDA device"), "refused before the GPU: {e}");

    // A folder without a table is named before any GPU work, as for the forward.
    let out = evo(
        &[
            "bench",
            "--champions",
            "genomes/champions/none",
            "--backward",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no dispatch table at genomes/champions/none/dispatch.toml"),
        "{}",
        stderr(&out)
    );

    if Path::new("/proc/driver/nvidia/gpus").exists() {
        eprintln!("skipped the no-GPU half: this machine has an NVIDIA driver");
        return;
    }
    let out = evo(
        &[
            "bench",
            "--champions",
            "genomes/champions/h100",
            "--backward",
        ],
        &[],
    );
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("no CUDA device") && e.contains("GREEN and FAST need a GPU"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn gate_on_a_genome_is_a_clear_no_device_error_or_a_pass() {
    let out = evo(
        &[
            "gate",
            "genomes/v6a.toml",
            "--suite",
            "quick",
            "--time",
            "none",
        ],
        &[],
    );
    let err = stderr(&out);
    if err.contains("no CUDA device") {
        assert_eq!(out.status.code(), Some(2));
        assert!(err.contains("GREEN and FAST need a GPU"), "{err}");
    } else {
        assert!(out.status.success(), "{err}");
        assert!(err.contains("all 1 kernels passed GREEN"), "{err}");
        assert!(stdout(&out).contains("v6a"), "{}", stdout(&out));
    }
}

/// `--gpus` and `--shard` are checked before any GPU is needed; on a machine without one
/// a gate over several GPUs is the same clear message as over one.
#[test]
fn gate_gpus_and_shard_arguments_are_checked_first() {
    let err = |args: &[&str]| {
        let out = evo(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    let e = err(&["gate", "genomes/v6a.toml", "--gpus", "0,0"]);
    assert!(e.contains("GPU 0 is named twice"), "{e}");
    let e = err(&["gate", "genomes/v6a.toml", "--gpus", "0,x"]);
    assert!(e.contains("`x` is not a GPU ordinal"), "{e}");
    let e = err(&[
        "gate",
        "genomes/v6a.toml",
        "--gpus",
        "0,1",
        "--shard",
        "1/2",
    ]);
    assert!(e.contains("give one of the two"), "{e}");
    let e = err(&["gate", "genomes/v6a.toml", "--shard", "3/2"]);
    assert!(e.contains("K must be between 1 and N"), "{e}");
    if !std::path::Path::new("/proc/driver/nvidia/gpus").exists() {
        let e = err(&["gate", "genomes/v6a.toml", "--gpus", "0,1"]);
        assert!(e.contains("GPU 0") && e.contains("no CUDA device"), "{e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}

/// scripts/check_verdicts.py's run on `records` (as `evo gate --json` writes them, to
/// gate.json in `dir`) with `dir` as the folder of the kernels' `.expected.toml` files.
fn check_verdicts(dir: &Path, records: &[serde_json::Value]) -> Output {
    let json = dir.join("gate.json");
    std::fs::write(&json, serde_json::to_string(records).unwrap()).unwrap();
    Command::new("python3")
        .arg(repo_root().join("scripts/check_verdicts.py"))
        .arg(&json)
        .arg(dir)
        .output()
        .expect("python3 runs")
}

/// scripts/check_verdicts.py on rows written the way `evo gate --json` writes them: the
/// verdicts, and a kernel verified by FAST but faster than its honest twin is BAD.
#[test]
fn check_verdicts_judges_verdicts_and_a_kernel_faster_than_its_twin() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["memo_content", "memo_content_twin", "batch_sets", "naive"] {
        let file = format!("{name}.expected.toml");
        std::fs::copy(
            repo_root().join("tests/kernels").join(&file),
            dir.path().join(&file),
        )
        .unwrap();
    }
    let row = |kernel: &str, verdict: &str, reason: Option<&str>, median: Option<f64>| {
        serde_json::json!({
            "kernel": format!("tests/kernels/{kernel}.cu"),
            "verdict": verdict,
            "reason": reason,
            "median_us": median,
        })
    };
    let run = |memo_us: f64| {
        let rows = vec![
            row("naive", "pass", None, None),
            row("naive", "timed", None, Some(1000.0)),
            row("memo_content_twin", "pass", None, None),
            row("memo_content_twin", "timed", None, Some(700.0)),
            row("memo_content", "pass", None, None),
            row("memo_content", "timed", None, Some(memo_us)),
            row("batch_sets", "pass", None, None),
            row(
                "batch_sets",
                "fail",
                Some("FAST verification (...): 3 of 118 checked launches wrong"),
                None,
            ),
        ];
        check_verdicts(dir.path(), &rows)
    };
    let honest = run(690.0);
    let text = stdout(&honest);
    assert!(honest.status.success(), "{text}{}", stderr(&honest));
    assert!(
        text.contains("ok   memo_content: got pass, FAST pass"),
        "{text}"
    );
    assert!(text.contains("0.99x memo_content_twin.cu's time"), "{text}");
    assert!(
        text.contains("ok   batch_sets: got pass, FAST fail"),
        "{text}"
    );
    let copy = run(14.0);
    let text = stdout(&copy);
    assert_eq!(copy.status.code(), Some(1), "{text}");
    assert!(text.contains("BAD  memo_content"), "{text}");
    assert!(
        text.contains("0.02x memo_content_twin.cu's time (at least 0.8)"),
        "{text}"
    );
}

/// scripts/check_verdicts.py on the backward gate's records (`evo gate --json` on `.cu`
/// files that declare `evo_pass`): GREEN failures by case, FAST failures by name, and
/// only the backward kernels judged (a forward kernel beside them is not BAD for want
/// of rows).
#[test]
fn check_verdicts_judges_the_backward_gates_records() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["bwd_naive", "bwd_memo_pointer", "bwd_no_dpsum", "naive"] {
        for ext in ["cu", "expected.toml"] {
            let file = format!("{name}.{ext}");
            std::fs::copy(
                repo_root().join("tests/kernels").join(&file),
                dir.path().join(&file),
            )
            .unwrap();
        }
    }
    let record = |kernel: &str, failures: &[&str], timed: bool, fast: &[&str]| {
        serde_json::json!({
            "kernel": format!("tests/kernels/{kernel}.cu"),
            "passed": failures.is_empty() && fast.is_empty(),
            "cases": [{"case": "B1 H8 L512 D64 f16", "skipped": null, "failures": failures}],
            "timings": if timed { serde_json::json!([{"warm": {"median_us": 900.0}}]) }
                       else { serde_json::json!([]) },
            "fast_failures": fast,
            "compile_errors": [],
        })
    };
    let run = |memo_fast: &[&str]| {
        let records = vec![
            record("bwd_naive", &[], true, &[]),
            record("bwd_memo_pointer", &[], memo_fast.is_empty(), memo_fast),
            record(
                "bwd_no_dpsum",
                &["launch 0: dQ: relative Frobenius error 5.1e-1 > 1.5e-3"],
                false,
                &[],
            ),
        ];
        check_verdicts(dir.path(), &records)
    };
    let right = run(&["FAST on B1 H8 L512 D64 f16: x failed the check of timed call 1"]);
    let text = stdout(&right);
    assert!(right.status.success(), "{text}{}", stderr(&right));
    assert!(
        text.contains("ok   bwd_naive: got pass, FAST pass"),
        "{text}"
    );
    assert!(
        text.contains("ok   bwd_memo_pointer: got pass, FAST fail"),
        "{text}"
    );
    assert!(text.contains("ok   bwd_no_dpsum: got fail"), "{text}");
    assert!(
        !text.contains(" naive:"),
        "a forward kernel is not judged: {text}"
    );
    let missed = run(&[]);
    let text = stdout(&missed);
    assert_eq!(missed.status.code(), Some(1), "{text}");
    assert!(
        text.contains("BAD  bwd_memo_pointer: got pass, FAST pass"),
        "{text}"
    );
}
