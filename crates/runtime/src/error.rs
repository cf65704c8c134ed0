//! The runtime's one error type. Every variant says what failed and, where there is one,
//! the fix; driver errors keep the call that raised them. The C ABI turns each variant
//! into a status code (`include/evo.h`) and the message into `evo_last_error()`.

use cudarc::driver::DriverError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    /// No usable CUDA driver or GPU: the same API without a GPU answers this, never a
    /// panic (cudarc would panic on a missing library, so presence is checked first).
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A driver call failed; `during` names the step (launch, module load...).
    #[error("CUDA driver error during {during}: {message}")]
    Driver { during: String, message: String },
    /// The kernel module breaks the ABI of kernels/ABI.md (a missing symbol, a geometry
    /// that cannot be launched), or was built for another GPU.
    #[error("kernel ABI: {0}")]
    Abi(String),
    /// The caller's arguments cannot be run: a null or host pointer, an unknown dtype
    /// code, a zero length.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The arguments are well-formed but the export has no kernel for them (a head dim
    /// no champion was evolved for); the caller falls back to another implementation.
    #[error("not covered by the export: {0}")]
    Unsupported(String),
    /// An export folder is missing a file or holds a malformed one.
    #[error("{path}: {message}")]
    Export { path: PathBuf, message: String },
}

impl RuntimeError {
    pub fn export(path: impl Into<PathBuf>, message: impl Into<String>) -> RuntimeError {
        RuntimeError::Export {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The driver's own words for an error, with its code.
pub fn driver_message(e: &DriverError) -> String {
    e.error_string()
        .map(|s| format!("{} ({:?})", s.to_string_lossy(), e.0))
        .unwrap_or_else(|_| format!("{:?}", e.0))
}

/// Turns a driver error into [`RuntimeError::Driver`] naming the step `during`.
pub fn driver(during: impl Into<String>) -> impl FnOnce(DriverError) -> RuntimeError {
    let during = during.into();
    move |e| RuntimeError::Driver {
        during,
        message: driver_message(&e),
    }
}
