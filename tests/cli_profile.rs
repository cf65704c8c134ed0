//! `evo profile` from the command line: a machine without Nsight Compute gets a message
//! naming every place searched, one without a GPU the typed "no CUDA device" error,
//! and neither ever a panic (on a GPU machine with ncu the same calls profile).

use crate::util::{evo, stderr};
use std::path::Path;

const PROBLEM: &str = "1,8,512,512,64,f16";

#[test]
fn without_ncu_the_message_says_it_is_needed_and_where_it_was_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("bin");
    std::fs::create_dir(&empty).unwrap();
    let path = empty.display().to_string();
    let home = dir.path().join("cuda").display().to_string();
    let out = dir.path().join("out").display().to_string();
    let o = evo(
        &[
            "profile",
            "genomes/v6a.toml",
            "--problem",
            PROBLEM,
            "--out",
            &out,
        ],
        &[("PATH", &path), ("CUDA_HOME", &home)],
    );
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    if Path::new("/usr/local/cuda/bin/ncu").exists() {
        // The last place searched has ncu here: the run goes on to the GPU.
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`evo profile` needs NVIDIA Nsight Compute (`ncu`), which was not found"),
        "{err}"
    );
    for place in [path, format!("{home}/bin"), "/usr/local/cuda/bin".into()] {
        assert!(err.contains(&place), "{place} not named in: {err}");
    }
}

/// A stand-in `ncu` that profiles nothing: with it on PATH the command gets past the
/// search, so what it says next is about the GPU (none in CI) or about ncu's failure.
#[cfg(unix)]
#[test]
fn without_a_gpu_the_message_is_the_no_device_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ncu = dir.path().join("ncu");
    std::fs::write(&ncu, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("out").display().to_string();
    let o = evo(
        &[
            "profile",
            "genomes/v6a.toml",
            "--problem",
            PROBLEM,
            "--out",
            &out,
        ],
        &[("PATH", &dir.path().display().to_string())],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("no CUDA device")
            || err.contains("ncu profiled no launch of `evo_attention_fwd`"),
        "{err}"
    );
}

#[test]
fn the_profiled_child_without_a_gpu_or_cubin_says_so() {
    let o = evo(
        &[
            "profile-target",
            "--cubin",
            "no_such.cubin",
            "--name",
            "x",
            "--problem",
            PROBLEM,
            "--seed",
            "1",
            "--launches",
            "4",
        ],
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no CUDA device") || err.contains("no_such.cubin: cannot read"),
        "{err}"
    );
}

#[test]
fn a_genome_or_a_source_and_a_valid_problem_are_required() {
    let o = evo(&["profile", "--problem", PROBLEM], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("<GENOME>"), "{}", stderr(&o));
    let o = evo(
        &[
            "profile",
            "genomes/v6a.toml",
            "--problem",
            "1,8,512,512,80,f16",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--problem"), "{}", stderr(&o));
}

/// A recorded profile is re-read without a GPU or ncu: the H100 fixture's summary.
#[test]
fn a_recorded_csv_is_summarised_without_a_gpu() {
    let o = evo(
        &[
            "profile",
            "--csv",
            "crates/gates/tests/fixtures/ncu_h100_fa3.csv",
        ],
        &[("PATH", "")],
    );
    let out = crate::util::stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    for line in [
        "device                 NVIDIA H100 80GB HBM3",
        "duration               479.8 µs",
        "registers / thread     168",
        "tensor pipe            65.0 % active; wgmma",
        "stall #1               wait 0.59",
    ] {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
    let o = evo(&["profile", "--csv", "no_such.csv"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no_such.csv: cannot read"),
        "{}",
        stderr(&o)
    );
}
