//! `evo evolve` (being built).

#[derive(Debug, clap::Args)]
pub struct EvolveArgs {}

pub fn run(_args: EvolveArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo evolve` is not built yet")
}
