//! `evo replay` (being built).

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {}

pub fn run(_args: ReplayArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo replay` is not built yet")
}
