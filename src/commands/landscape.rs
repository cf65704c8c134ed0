//! `evo landscape` (being built).

#[derive(Debug, clap::Args)]
pub struct LandscapeArgs {}

pub fn run(_args: LandscapeArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo landscape` is not built yet")
}
