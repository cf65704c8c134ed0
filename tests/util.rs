//! Runs the `evo` binary built by this test run, from the repository root.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `evo ARGS`, run from the repository root, not yet started.
pub fn evo_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_evo"));
    cmd.args(args).current_dir(repo_root());
    cmd
}

/// The output of `evo ARGS` with extra environment variables.
pub fn evo(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = evo_command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the evo binary runs")
}

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `evo export OUT --champions genomes/champions/h100 EXTRA...` (the recorded champions).
pub fn export_champions(out: &Path, extra: &[&str]) -> Output {
    let out = out.display().to_string();
    let mut args = vec![
        "export",
        out.as_str(),
        "--champions",
        "genomes/champions/h100",
    ];
    args.extend(extra);
    evo(&args, &[])
}

/// The synthetic landscape fixture the search tests replay (made-up numbers).
pub fn synthetic_landscape() -> PathBuf {
    repo_root().join("crates/mutator/tests/fixtures/synthetic-landscape")
}

/// `evo evolve --backend replay:<the synthetic landscape> --experiment EXP --quiet EXTRA...`
pub fn evolve_synthetic(exp: &Path, extra: &[&str]) -> Output {
    let backend = format!("replay:{}", synthetic_landscape().display());
    let exp = exp.display().to_string();
    let mut args = vec![
        "evolve",
        "--backend",
        &backend,
        "--experiment",
        &exp,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    evo(&args, &[])
}
