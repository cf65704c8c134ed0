//! The GPU backend of the search: parallel compiles here, gates in a child worker.
//!
//! A candidate kernel may fault (illegal address), hang, or leave the CUDA context
//! unusable. None of that may end a search, so this process never touches CUDA: it
//! compiles candidates in parallel (rayon, NVRTC needs no GPU), writes the CUBINs
//! to disk, and hands them one at a time to `evo worker`, a child process that owns
//! the context and answers with an [`Evaluation`](evo_gates::Evaluation) per JSON
//! line. A child that dies is recorded as `runtime_failed`, one that does not answer
//! within the timeout is killed and recorded as `timeout`; either way a fresh child
//! takes over.
//!
//! With several GPUs (`--gpus`), one worker runs per GPU, each pinned to its device
//! through `CUDA_VISIBLE_DEVICES` and replaced on that same device when it dies; the
//! candidates of a batch go to whichever worker is free. All GPUs must be one model,
//! or their timings would not compare.
//!
//! A candidate's way through this crate, one file per stop: `plan.rs` says what is
//! compiled and measured; `compiler.rs` compiles a candidate on the compile threads,
//! taking what `cubin_cache.rs` kept from earlier runs, into a request of the wire
//! protocol (`protocol.rs`). A generational search's batch then waits in `ahead.rs`
//! when it was announced ahead of its turn, and `pool.rs` hands its candidates to the
//! first free runner; a steady-state search's candidates go one at a time through
//! `stream.rs`, whose lanes (`lane.rs`) hold the runners while candidates are waiting. A runner
//! (`runner.rs`, one per GPU; `gpus.rs`: which GPUs, pinned how) sends a candidate to
//! its child process (`child.rs`) and waits for the answer; a new best's full-gate
//! variants compile in `late.rs` before its confirmation run, against the pool's bar
//! (`bar.rs`); `usage.rs` keeps where
//! each GPU's time went, `tally.rs` what the compiles cost; `evaluator.rs` ties them into the search's `Evaluator`;
//! `serve.rs` is the child's side.

mod ahead;
mod bar;
mod child;
mod compiler;
mod cubin_cache;
mod evaluator;
mod gpus;
mod lane;
mod late;
mod plan;
mod pool;
mod protocol;
mod runner;
mod serve;
mod stream;
mod tally;
mod usage;

pub use ahead::Ahead;
pub use child::WorkerCommand;
pub use compiler::{default_compile_threads, BatchCompiler, Prepared};
pub use cubin_cache::CubinCache;
pub use evaluator::GpuEvaluator;
pub use gpus::{parse_gpus, require_one_model};
pub use late::LateCompiler;
pub use plan::{GpuPlan, Plant};
pub use pool::RunnerPool;
pub use protocol::{Hello, VariantFile, WorkerRequest, SEED_POOL};
pub use runner::Runner;
pub use serve::serve;
pub use stream::QUEUED_PER_GPU;
pub use tally::CompileTally;
pub use usage::GpuUse;

#[cfg(test)]
mod tests;
