//! `evo space` (being built).

#[derive(Debug, clap::Args)]
pub struct SpaceArgs {}

pub fn run(_args: SpaceArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo space` is not built yet")
}
