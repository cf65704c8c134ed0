//! `evo`: evolutionary search for FlashAttention-style CUDA kernels.

mod cli;
mod commands;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    restore_sigpipe();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("EVO_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = cli::Cli::parse();
    match commands::run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Rust starts a program with SIGPIPE ignored, so printing into a closed pipe
/// (`evo dispatch ... | head -1`) is an error, and `println!` panics on it. A command-line
/// tool should end as the other tools in the pipe do: killed by SIGPIPE, without a word.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first in main, before any thread is started; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
