//! The gates' one error type. Every variant says what failed and, where there is
//! one, the fix; driver and cuBLAS errors keep the call that raised them.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum GateError {
    /// No usable CUDA driver or GPU: the same API without a GPU answers this,
    /// never a panic (candle's `NotCompiledWithCudaSupport` idea).
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A driver call failed; `during` names the step (launch, copy, module load...).
    #[error("CUDA driver error during {during}: {message}")]
    Driver { during: String, message: String },
    /// A cuBLAS call failed (the hybrid baseline).
    #[error("cuBLAS error during {during}: {message}")]
    Blas { during: String, message: String },
    /// The kernel module breaks the ABI of kernels/ABI.md (a missing symbol, a
    /// geometry that cannot be launched).
    #[error("kernel ABI: {0}")]
    Abi(String),
    /// A kernel (the hybrid's softmax, a hand-written file) did not compile.
    #[error("compile failed: {0}")]
    Compile(String),
    /// The CPU reference failed (candle); this is a bug in the gates, not in the kernel.
    #[error("reference (candle) failed: {0}")]
    Reference(String),
    /// The problem cannot be run (a zero length, B·H over the grid limit).
    #[error("problem {problem}: {message}")]
    Problem { problem: String, message: String },
    /// The SDPA baseline script failed or printed something unreadable.
    #[error("SDPA baseline: {0}")]
    Sdpa(String),
    /// A user's suite file (`evo gate --suite FILE.toml`) is unreadable or wrong.
    #[error("{path}: {message}")]
    Suite { path: String, message: String },
    /// The OS error is part of the message, not a `source`, so a report that prints the
    /// error chain prints it once.
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
}

/// The runtime's errors are the gates' of the same kind, with the same words: the gates
/// launch through the runtime, and their reports and tests read these variants.
impl From<evo_runtime::RuntimeError> for GateError {
    fn from(e: evo_runtime::RuntimeError) -> GateError {
        use evo_runtime::RuntimeError as R;
        match e {
            R::NoDevice(m) => GateError::NoDevice(m),
            R::Driver { during, message } => GateError::Driver { during, message },
            R::Abi(m) => GateError::Abi(m),
            // The gates size their own buffers and open no export: these would be bugs
            // in the gates, reported as what the kernel was called with.
            other @ (R::InvalidArgument(_) | R::Unsupported(_) | R::Export { .. }) => {
                GateError::Abi(other.to_string())
            }
        }
    }
}
