//! The GPU backend's commands on a machine without a GPU: a clear message and exit 2,
//! never a panic; bad plan files named with line and field before any GPU is needed.

use crate::util::{evo, stderr, stdout};

/// These tests describe a machine without the NVIDIA driver (CI's); on a GPU machine the
/// same commands would really run, which the GPU records cover instead.
fn has_nvidia_driver() -> bool {
    std::path::Path::new("/proc/driver/nvidia/gpus").exists()
}

fn assert_no_device_message(args: &[&str]) {
    if has_nvidia_driver() {
        eprintln!("skipped: this machine has an NVIDIA driver");
        return;
    }
    let out = evo(args, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no CUDA device"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn landscape_without_a_gpu_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("landscape");
    assert_no_device_message(&[
        "landscape",
        "--plan",
        "experiments/2026-11-22-h100-landscape/plan.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
}

/// `--count` needs no GPU: the plan's points and valid genomes per family, and how many
/// of them the output folder (here the gzipped record in the repository) already holds.
#[test]
fn landscape_count_sizes_a_plan_without_a_gpu() {
    let plan = "experiments/2026-11-23-h100-landscape/plan.toml";
    let out = evo(
        &[
            "landscape",
            "--plan",
            plan,
            "--out",
            "experiments/2026-11-23-h100-landscape",
            "--count",
            "sm_90",
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("21888 points, 10560 valid on sm_90 at D = 64 (ampere 7680, hopper 2880)"),
        "{text}"
    );
    let recorded: usize = text
        .split(" of them recorded")
        .next()
        .and_then(|s| s.rsplit("; ").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no recorded count in: {text}"));
    assert_eq!(recorded, 10560, "the record is complete: {text}");
    // On sm_89 the Hopper family has no valid genome, so the count is Ampere's alone.
    let dir = tempfile::tempdir().unwrap();
    let out = evo(
        &[
            "landscape",
            "--plan",
            plan,
            "--out",
            dir.path().to_str().unwrap(),
            "--count",
            "sm_89",
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!text.contains("hopper"), "{text}");
    assert!(text.contains("0 of them recorded"), "{text}");
    let bad = evo(
        &[
            "landscape",
            "--plan",
            plan,
            "--out",
            "x",
            "--count",
            "sm_70",
        ],
        &[],
    );
    assert!(
        stderr(&bad).contains("use sm_89 or sm_90"),
        "{}",
        stderr(&bad)
    );
}

/// A landscape kept gzipped is resumed from its plain text: `evo landscape` writes
/// evaluations.jsonl from evaluations.jsonl.gz before it needs a GPU, line for line.
#[test]
fn landscape_resumes_from_a_gzipped_record() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("landscape");
    std::fs::create_dir_all(&out).unwrap();
    let gz = "experiments/2026-11-23-h100-landscape/evaluations.jsonl.gz";
    std::fs::copy(gz, out.join("evaluations.jsonl.gz")).unwrap();
    let run = evo(
        &[
            "landscape",
            "--plan",
            "experiments/2026-11-23-h100-landscape/plan.toml",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(stdout(&run).contains("resuming from"), "{}", stdout(&run));
    let plain = std::fs::read_to_string(out.join("evaluations.jsonl")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap()),
        &mut text,
    )
    .unwrap();
    assert_eq!(plain, text);
    if !has_nvidia_driver() {
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(stderr(&run).contains("no CUDA device"), "{}", stderr(&run));
    }
}

/// The README's main job on a machine without a GPU: `evo evolve` with no backend named
/// replays the two-family H100 landscape, says so, and, that landscape holding the
/// Hopper kernels, ends with a champion faster than every Ampere genome in it (8.25 µs).
#[test]
fn evolve_without_a_gpu_replays_the_two_family_landscape_and_says_so() {
    if has_nvidia_driver() {
        eprintln!("skipped: with a GPU `evo evolve` searches for real");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("exp");
    let out = evo(
        &["evolve", "--experiment", exp.to_str().unwrap(), "--quiet"],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains(
            "replaying 21888 measurements recorded on NVIDIA H100 80GB HBM3 on 2026-11-23 (no CUDA device here)"
        ),
        "{text}"
    );
    assert!(text.contains("200 evaluations"), "{text}");
    let champion_us: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("champion: "))
        .and_then(|l| l.split(" at ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|us| us.parse().ok())
        .unwrap_or_else(|| panic!("no champion line in: {text}"));
    let ampere_best = 8.25;
    assert!(champion_us < ampere_best, "{text}");
    assert!(text.contains("hopper wgmma"), "{text}");
}

#[test]
fn replay_without_a_gpu_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        "experiments/seed-lineage/lineage.json",
        dir.path().join("lineage.json"),
    )
    .unwrap();
    assert_no_device_message(&["replay", dir.path().to_str().unwrap()]);
}

#[test]
fn evolve_on_the_gpu_backend_without_a_gpu_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("exp");
    assert_no_device_message(&[
        "evolve",
        "--backend",
        "gpu",
        "--budget",
        "4",
        "--experiment",
        exp.to_str().unwrap(),
    ]);
}

#[test]
fn a_malformed_landscape_plan_is_named_with_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, "green = \"quick\"\nnotes = 3\n").unwrap();
    let out = evo(
        &[
            "landscape",
            "--plan",
            plan.to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
        &[],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("plan.toml:2:9"), "{err}");
    assert!(err.contains("expected a string"), "{err}");
}

#[test]
fn the_fault_drill_refuses_the_replay_backend() {
    let out = evo(
        &[
            "evolve",
            "--backend",
            "replay:experiments/2026-11-22-h100-landscape",
            "--plant-faults",
            "3",
            "--budget",
            "4",
        ],
        &[],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--plant-faults"), "{err}");
}

#[test]
fn objective_flags_are_checked_before_any_gpu_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let replay = "replay:experiments/2026-11-22-h100-landscape";
    // One experiment folder per run: a folder's experiment.toml is what it resumes.
    let exp = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (exp1, exp2, exp3) = (exp("a"), exp("b"), exp("c"));
    let bad = evo(
        &[
            "evolve",
            "--problem",
            "1,8,512,512,80,f16",
            "--experiment",
            &exp1,
        ],
        &[],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("head_dim 80"), "{}", stderr(&bad));
    let suite = evo(
        &[
            "evolve",
            "--backend",
            replay,
            "--suite",
            "anchors",
            "--experiment",
            &exp2,
        ],
        &[],
    );
    assert_eq!(suite.status.code(), Some(2));
    assert!(
        stderr(&suite).contains("suite objective needs the GPU backend"),
        "{}",
        stderr(&suite)
    );
    let other = evo(
        &[
            "evolve",
            "--backend",
            replay,
            "--problem",
            "1,8,512,512,64,f16,causal",
            "--experiment",
            &exp3,
        ],
        &[],
    );
    assert_eq!(other.status.code(), Some(2));
    assert!(
        stderr(&other).contains("replay can only answer its own problem"),
        "{}",
        stderr(&other)
    );
}

/// A backward search without a GPU: the recorded landscape is of forward kernels, so
/// replay cannot answer it, and the message says what would.
#[test]
fn a_backward_search_is_not_replayed_on_a_forward_landscape() {
    if has_nvidia_driver() {
        eprintln!("skipped: this machine has an NVIDIA driver");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("bwd");
    let out = evo(
        &[
            "evolve",
            "--pass",
            "backward",
            "--budget",
            "5",
            "--experiment",
            exp.to_str().unwrap(),
        ],
        &[],
    );
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("a landscape of forward kernels; this is a backward search"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // A failed start leaves no folder behind.
    assert!(!exp.exists(), "{}", exp.display());
}
