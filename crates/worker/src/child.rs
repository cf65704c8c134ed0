//! One `evo worker` child process: how it is started, its greeting, and its end.

use crate::gpus::pin;
use crate::protocol::Hello;
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// How to start a worker: `evo worker` normally, a stand-in in the tests.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Extra environment, e.g. the `CUDA_VISIBLE_DEVICES` that pins it to one GPU.
    pub env: Vec<(String, String)>,
}

impl WorkerCommand {
    /// This very binary, `evo worker`.
    pub fn evo() -> anyhow::Result<WorkerCommand> {
        Ok(WorkerCommand {
            program: std::env::current_exe()
                .context("cannot locate the evo binary for the worker")?,
            args: vec!["worker".into()],
            env: Vec::new(),
        })
    }

    /// The same command, shown only GPU `ordinal` of the GPUs this process sees.
    pub(crate) fn pinned(&self, ordinal: u32) -> anyhow::Result<WorkerCommand> {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let mut pinned = self.clone();
        pinned.env.push((
            "CUDA_VISIBLE_DEVICES".into(),
            pin(visible.as_deref(), ordinal)?,
        ));
        Ok(pinned)
    }
}

/// A running `evo worker` child and the channel its stdout lines arrive on.
pub(crate) struct Worker {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) lines: Receiver<String>,
}

impl Worker {
    pub(crate) fn spawn(command: &WorkerCommand) -> anyhow::Result<(Worker, Hello)> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start the worker {}", command.program.display()))?;
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin,
            lines,
        };
        let hello = match worker.lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => serde_json::from_str::<Hello>(&line)
                .with_context(|| format!("worker greeted with an unreadable line: {line}"))?,
            Err(_) => {
                worker.kill();
                bail!("`evo worker` exited or stalled before saying which device it holds")
            }
        };
        Ok((worker, hello))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}
