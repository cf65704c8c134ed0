//! `evo strategies` (being built).

#[derive(Debug, clap::Args)]
pub struct StrategiesArgs {}

pub fn run(_args: StrategiesArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo strategies` is not built yet")
}
