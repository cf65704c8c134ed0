//! `evo gate` (being built).

#[derive(Debug, clap::Args)]
pub struct GateArgs {}

pub fn run(_args: GateArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo gate` is not built yet")
}
