//! The `evo` binary's integration tests: one test binary, one module per area.

// `evo space`: the valid-space table and its arguments.
mod cli_space;
// `evo compile`: reports, defines, and the errors for invalid, malformed and uncompilable input.
mod cli_compile;
// Shared helpers: run the built binary from the repository root.
mod util;
// `evo evolve`, `lineage`, `insights`, `strategies` end to end on the synthetic landscape fixture.
mod search;
// `evo gate` and `evo bench`: argument errors and the no-GPU error (the gates run on GPU machines).
mod cli_gate;
// The recorded H100 champion: its genome, defines and lineage table as snapshots.
mod champion;
// The GPU backend's commands without a GPU: clear messages, named plan errors.
mod cli_gpu_backend;
// `evo profile`: the no-ncu and no-GPU messages, argument errors.
mod cli_profile;
// The island model: islands as processes, kill and resume, `evo merge`.
mod islands;
// The per-shape champions: snapshots, the table against its records, `evo dispatch`.
mod champions;
// Champions folders that are damaged, old or hold a faster champion: refused, printed honestly, kept.
mod champions_checks;
// `evo export`: the package's files, manifest and header, the runtime and Python reading it (PTX, no GPU).
mod export;
// `evo snapshot` without a GPU: bad export and snapshot files named, then the no-GPU error.
mod cli_snapshot;
// The export on a GPU: a C program and the Python module run champions (opt-in: --features gpu).
#[cfg(feature = "gpu")]
mod gpu_export;
// `evo snapshot` on a GPU: record, check identical, catch a moved value (opt-in: --features gpu).
#[cfg(feature = "gpu")]
mod gpu_snapshot;
// The backward through the export on a GPU: evo's gradients against torch SDPA's (opt-in: --features gpu).
#[cfg(feature = "gpu")]
mod gpu_backward;
// The scripts the README shows, on the CPU: export_check.py, check_verdicts.py, landscape_summary.py, bench_best.py, worker_gaps.py.
mod scripts;
// The README against the repository and the binary: every path it names exists, its replay figures are what evo prints.
mod readme;
// Resume against the record, budgets that only grow, folder locks, writers that check their destination.
mod cli_resume;
// Bad input through the binary: strict problem specs and genome files, options named as options.
mod cli_inputs;
// `evo tune` on the CPU: the presets, refused inputs, a replayed tune end to end and its resume.
mod cli_tune;
// The cost model on the CPU: `evo model`'s table and snapshots, the guided strategy of `evolve` and `strategies`.
mod cli_model;
