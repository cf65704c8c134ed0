//! Snapshots of an export's champion outputs, portable across GPUs, drivers and evo
//! versions (`evo snapshot`).
//!
//! A snapshot runs every champion of an export on inputs drawn from a seed by a
//! written-down generator ([`inputs`]), and keeps a summary of each output O
//! ([`summary`]: per run of rows a BLAKE3 hash, the f64 sum and sum of squares, and
//! sampled values) in a JSON file ([`mod@file`]). Checking recomputes the outputs on
//! another machine, or after a driver or evo update, and judges each against its
//! summary ([`mod@compare`]): rows whose hash matches are identical, the rest must be within
//! the recorded tolerance. That separates "the kernel runs the same here" from "the
//! kernel is right", which GREEN answers against a reference: a snapshot needs no
//! reference and no gates, only the export and the runtime.
//!
//! The GPU part ([`run`]: upload, [`crate::Champions::forward`], download) is behind a
//! trait, so everything else is tested without a GPU.

pub mod compare;
pub mod file;
pub mod inputs;
pub mod run;
pub mod summary;

pub use compare::{compare, Comparison, Mismatch, Tolerance};
pub use file::{ChampionKernel, Entry, ExportInfo, Image, Machine, Snapshot, SNAPSHOT_FORMAT};
pub use inputs::{Inputs, GENERATOR};
pub use run::{check, export_problems, record, CheckReport, EntryCheck, GpuRunner, Runner};
pub use summary::OutputSummary;

use crate::error::RuntimeError;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SnapshotError {
    /// A snapshot file that cannot be read, trusted or written; the message names the
    /// field.
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    /// A problem that cannot be recorded or checked (a NaN in its output, inputs that
    /// are not the snapshot's).
    #[error("{problem}: {message}")]
    Run { problem: String, message: String },
    /// The export or the GPU (no device, a driver error, a champion that cannot load).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl SnapshotError {
    pub fn file(path: &Path, message: impl Into<String>) -> SnapshotError {
        SnapshotError::File {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}
