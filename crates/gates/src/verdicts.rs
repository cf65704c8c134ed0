//! The hand-written kernels of tests/kernels and the verdicts their `.expected.toml`
//! files state, as the GPU tests of both passes read them.

use crate::compile::KernelSource;
use crate::gpu_tests::repo;
use evo_genome::Pass;
use std::path::{Path, PathBuf};

#[derive(serde::Deserialize)]
pub(crate) struct Expected {
    pub(crate) verdict: String,
    pub(crate) reason_contains: Option<String>,
    pub(crate) because: String,
    /// FAST's verdict on the seed shape, where the kernel passes GREEN and the point is
    /// the timed launches.
    #[serde(default)]
    pub(crate) fast: Option<String>,
    /// With a FAST pass: its median is at least this fraction of naive.cu's.
    #[serde(default)]
    pub(crate) min_time_vs_naive: Option<f64>,
    /// With a FAST pass: its median is at least `min_time_vs_twin` of this kernel's
    /// (tests/kernels/<twin>.cu: the same work done honestly).
    #[serde(default)]
    pub(crate) twin: Option<String>,
    #[serde(default)]
    pub(crate) min_time_vs_twin: Option<f64>,
}

/// Prints a hand-written kernel's verdict; the line for the test's failure when it is
/// not the `.expected.toml`'s (`want`) or its failures lack the expected reason.
pub(crate) fn verdict_mismatch(
    label: &str,
    got: &str,
    want: &str,
    expected: &Expected,
    failures: &str,
) -> Option<String> {
    eprintln!(
        "{label}: {got} (expected {want}: {})\n{failures}",
        expected.because
    );
    let reason_ok = expected
        .reason_contains
        .as_ref()
        .is_none_or(|r| failures.contains(r.as_str()));
    (got != want || !reason_ok).then(|| {
        format!(
            "{label}: got {got}, expected {want} ({:?})\n{failures}",
            expected.reason_contains
        )
    })
}

/// The hand-written kernels of `pass` in tests/kernels (`.cu` files, sorted) and their
/// sources, each named by `path_of` its file.
pub(crate) fn hand_written(
    pass: Pass,
    path_of: impl Fn(&Path) -> String,
) -> (Vec<PathBuf>, Vec<KernelSource>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/kernels"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let source = KernelSource::File {
                path: path_of(&p),
                text: std::fs::read_to_string(&p).unwrap(),
            };
            (p, source)
        })
        .filter(|(_, s)| s.pass() == pass)
        .unzip()
}
