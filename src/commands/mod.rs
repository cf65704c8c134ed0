//! One module per subcommand; each owns its clap arguments and its `run`.

pub mod bench;
pub mod champions;
pub mod compile;
pub mod cost_model;
pub mod evolve;
pub mod export;
pub mod gate;
pub mod insights;
pub mod landscape;
pub mod lineage;
pub mod merge;
pub mod profile;
pub mod replay;
pub mod snapshot;
pub mod space;
pub mod strategies;
pub mod tune;
pub mod worker;

use crate::cli::Command;
use anyhow::Context;

/// A file a command is about to write: its folder must exist, and a file already there is
/// replaced only when `force` says so. `option` names the flag in the error.
pub(crate) fn check_new_file(
    path: &std::path::Path,
    force: bool,
    option: &str,
) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("{option} {} is a folder; name a file", path.display());
    }
    if path.exists() && !force {
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        anyhow::bail!(
            "{option} {} exists ({size} bytes); pass --force to replace it, or name a new file",
            path.display()
        );
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !parent.is_dir() {
        anyhow::bail!(
            "{option} {}: the folder {} does not exist; create it first",
            path.display(),
            parent.display()
        );
    }
    Ok(())
}

/// The genome target of an opened GPU, or an error naming its compute capability.
pub fn device_target(device: &evo_gates::Device) -> anyhow::Result<evo_genome::Target> {
    device.target().with_context(|| {
        format!(
            "{} has compute capability {:?}, which no genome target describes (sm_89, sm_90)",
            device.name(),
            device.compute_capability()
        )
    })
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Space(a) => space::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Gate(a) => gate::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Champions(a) => champions::run(a),
        Command::Dispatch(a) => champions::run_dispatch(a),
        Command::Export(a) => export::run(a),
        Command::Snapshot(a) => snapshot::run(a),
        Command::Evolve(a) => evolve::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Lineage(a) => lineage::run(a),
        Command::Insights(a) => insights::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Strategies(a) => strategies::run(a),
        Command::Model(a) => cost_model::run(a),
        Command::Landscape(a) => landscape::run(a),
        Command::Profile(a) => profile::run(a),
        Command::ProfileTarget(a) => profile::run_target(a),
        Command::Worker(a) => worker::run(a),
    }
}
