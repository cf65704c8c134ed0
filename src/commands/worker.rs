//! `evo worker` (being built).

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {}

pub fn run(_args: WorkerArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo worker` is not built yet")
}
