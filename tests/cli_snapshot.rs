//! `evo snapshot` on an export of the recorded H100 champions (PTX), without a GPU:
//! a bad export or snapshot file is named with its field before any GPU is asked for,
//! and recording or checking then ends on the runtime's one-line "no CUDA device"
//! error, never a panic. On a GPU machine the same calls run instead (gpu_snapshot.rs
//! checks real snapshots there).
//!
//! Needs NVRTC, as the export tests.

use crate::util::{evo, export_champions, stderr, stdout};
use evo_genome::Problem;
use evo_runtime::snapshot::{record, Inputs, Machine, Runner};
use evo_runtime::{Champions, RuntimeError};
use std::path::Path;

fn export(out: &Path) {
    let o = export_champions(out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn snapshot(args: &[&Path], extra: &[&str]) -> std::process::Output {
    let mut all = vec!["snapshot".to_string(), args[0].display().to_string()];
    all.extend(["--export".to_string(), args[1].display().to_string()]);
    all.extend(extra.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    evo(&all, &[])
}

/// A "GPU" whose output is Q: a snapshot that reads back as valid, which no champion
/// reproduces.
struct QAsOutput(Machine);

impl Runner for QAsOutput {
    fn machine(&self) -> &Machine {
        &self.0
    }

    fn compute_capability(&self) -> (i32, i32) {
        (9, 0)
    }

    fn output(
        &self,
        _: &Champions,
        _: &Problem,
        inputs: &Inputs,
    ) -> Result<Vec<u16>, RuntimeError> {
        Ok(inputs.q.clone())
    }
}

#[test]
fn snapshot_names_bad_files_then_needs_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    export(&out);
    let file = dir.path().join("s.json");

    // Recording: the runtime's error when there is no GPU, and no file.
    let o = snapshot(&[&file, &out], &[]);
    let e = stderr(&o);
    if e.contains("no CUDA device") {
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.starts_with("error: no CUDA device: libcuda"), "{e}");
        assert!(!e.contains("panicked") && !file.exists(), "{e}");
    } else {
        assert!(o.status.success(), "{e}");
        assert!(stdout(&o).contains("recorded 14 outputs"), "{}", stdout(&o));
    }

    // Checking: the file is read and checked first, and errors name it and the field.
    let bad = dir.path().join("bad.json");
    for (text, want) in [
        ("{\"format\": 1, \"seed\": 1", "not JSON"),
        ("{\"format\": 9}", "field `format` is 9"),
        (
            "{\"format\": 1, \"seed\": \"one\"}",
            "field `seed`: invalid type",
        ),
    ] {
        std::fs::write(&bad, text).unwrap();
        let o = snapshot(&[&bad, &out], &["--check"]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains(&format!("{}: {want}", bad.display())),
            "{want}: {e}"
        );
    }

    // A valid snapshot gets as far as the GPU: without one, the runtime's error; with
    // one, the champions' outputs are not Q.
    let champions = Champions::open(&out).unwrap();
    let problems: Vec<Problem> = ["1,8,512,512,64,f16", "1,8,512,512,64,bf16,causal"]
        .map(|s| s.parse().unwrap())
        .to_vec();
    let fake = QAsOutput(Machine {
        device: "NVIDIA H100 80GB HBM3".into(),
        compute_capability: "9.0".into(),
        cuda_driver: "13.0".into(),
        nvidia_driver: None,
    });
    let recorded = record(&champions, &fake, &problems, 1, None).unwrap();
    recorded.write(&file).unwrap();
    let o = snapshot(&[&file, &out], &["--check"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    if e.contains("no CUDA device") {
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(!e.contains("panicked"), "{e}");
    } else {
        assert!(e.contains("2 of 2 outputs out of tolerance"), "{e}");
    }

    // An export that is not one.
    let o = snapshot(&[&file, &dir.path().join("nowhere")], &["--check"]);
    assert!(
        stderr(&o).contains("nowhere/manifest.json: cannot read it"),
        "{}",
        stderr(&o)
    );
}

/// Recording checks FILE before anything runs: an existing file is refused (named with
/// what it is) unless --force, as are a missing folder and a file inside the export.
#[test]
fn snapshot_checks_its_file_before_recording() {
    let dir = tempfile::tempdir().unwrap();
    // No export needed: the file is checked before the export is read.
    let export = dir.path().join("export");
    std::fs::create_dir_all(&export).unwrap();
    let mine = dir.path().join("mine.json");
    std::fs::write(&mine, "my results\n").unwrap();
    let o = snapshot(&[&mine, &export], &[]);
    let e = stderr(&o);
    assert!(
        !o.status.success()
            && e.contains("mine.json: exists (not a snapshot)")
            && e.contains("--check")
            && e.contains("--force"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "my results\n");
    // With --force the file is no obstacle: the export is read next.
    let o = snapshot(&[&mine, &export], &["--force"]);
    assert!(
        stderr(&o).contains("manifest.json: cannot read it"),
        "{}",
        stderr(&o)
    );

    let o = snapshot(&[&dir.path().join("nowhere/s.json"), &export], &[]);
    assert!(
        stderr(&o).contains("nowhere: no such folder for the snapshot"),
        "{}",
        stderr(&o)
    );
    let o = snapshot(&[&export.join("s.json"), &export], &[]);
    assert!(
        stderr(&o).contains("inside the export it records"),
        "{}",
        stderr(&o)
    );
    let o = snapshot(&[&export, &export], &[]);
    assert!(
        stderr(&o).contains("a folder; name the snapshot's file"),
        "{}",
        stderr(&o)
    );
}
