//! `evo lineage` (being built).

#[derive(Debug, clap::Args)]
pub struct LineageArgs {}

pub fn run(_args: LineageArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo lineage` is not built yet")
}
