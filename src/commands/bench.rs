//! `evo bench` (being built).

#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

pub fn run(_args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo bench` is not built yet")
}
