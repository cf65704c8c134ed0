//! `evo worker`: the child process that owns the CUDA context (see the evo-worker crate).

/// Reads JSON requests on stdin, writes one evaluation per line on stdout.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {}

pub fn run(_args: WorkerArgs) -> anyhow::Result<()> {
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    evo_worker::serve(stdin, stdout)
}
