//! `evo compile` (being built).

#[derive(Debug, clap::Args)]
pub struct CompileArgs {}

pub fn run(_args: CompileArgs) -> anyhow::Result<()> {
    anyhow::bail!("`evo compile` is not built yet")
}
