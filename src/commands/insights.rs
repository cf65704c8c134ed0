//! `evo insights` (being built).

#[derive(Debug, clap::Args)]
pub struct InsightsArgs {}

pub fn run(_args: InsightsArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo insights` is not built yet")
}
