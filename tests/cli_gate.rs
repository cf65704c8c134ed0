//! `evo gate` / `evo bench` from the command line, without a GPU: argument errors name
//! the fix, and a machine without a driver gets the typed "no CUDA device" error (on a
//! GPU machine the same calls run the gates and must pass).

use crate::util::{evo, repo_root, stderr, stdout};

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
        let json = dir.path().join("gate.json");
        std::fs::write(&json, serde_json::to_string(&rows).unwrap()).unwrap();
        std::process::Command::new("python3")
            .arg(repo_root().join("scripts/check_verdicts.py"))
            .arg(&json)
            .arg(dir.path())
            .output()
            .expect("python3 runs")
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
