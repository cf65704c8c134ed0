//! The command line: one subcommand per verb, each verb's arguments in its own module.

use crate::commands;
use clap::{Parser, Subcommand};

/// Evolutionary search for FlashAttention-style CUDA attention kernels.
///
/// A genome (genomes/*.toml) names every design choice of a forward kernel; `evo`
/// compiles it through one CUDA template (kernels/attention.cu), checks it against
/// a reference (GREEN), times it (FAST), and evolves better ones.
#[derive(Debug, Parser)]
#[command(name = "evo", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Count the valid genomes per device and head dimension.
    Space(commands::space::SpaceArgs),
    /// Compile a genome with NVRTC and print defines, PTX or the ptxas resource report.
    Compile(commands::compile::CompileArgs),
    /// Run the GREEN gate (correctness) and then FAST (timing) on a genome or a .cu file.
    Gate(commands::gate::GateArgs),
    /// Time genomes against the cuBLAS hybrid and PyTorch SDPA on a suite of shapes.
    Bench(commands::bench::BenchArgs),
    /// Per-shape champions as data: write genomes/champions/<device>/ from searches.
    Champions(commands::champions::ChampionsArgs),
    /// Which champion a shape gets from the dispatch table, and why.
    Dispatch(commands::champions::DispatchArgs),
    /// A champions folder as a package: kernels, C header and library, Python module.
    Export(commands::export::ExportArgs),
    /// An export's champion outputs on fixed inputs, recorded to a file or checked against one.
    Snapshot(commands::snapshot::SnapshotArgs),
    /// Evolve kernels: on the GPU if there is one, else on a recorded landscape.
    Evolve(commands::evolve::EvolveArgs),
    /// Tune a model's shapes: one search per shape, then their champions benched in a table.
    Tune(commands::tune::TuneArgs),
    /// Print an experiment's lineage: the path from the root to the champion.
    Lineage(commands::lineage::LineageArgs),
    /// Join the experiments of an island-model search into one (one lineage graph).
    Merge(commands::merge::MergeArgs),
    /// For each kind of gene change: how often it was tried, how often it helped.
    Insights(commands::insights::InsightsArgs),
    /// Re-evaluate an experiment's lineage on the GPU at hand: then vs now.
    Replay(commands::replay::ReplayArgs),
    /// Compare search strategies on a recorded landscape over many seeds.
    Strategies(commands::strategies::StrategiesArgs),
    /// The cost model: what it learns from, and how well it ranks a shape it never saw.
    Model(commands::cost_model::ModelArgs),
    /// Measure every genome of a declared sub-space and record the landscape.
    Landscape(commands::landscape::LandscapeArgs),
    /// Profile one launch of a genome or a .cu file with Nsight Compute (ncu) and summarise it.
    Profile(commands::profile::ProfileArgs),
    /// Internal: the process ncu profiles; loads a CUBIN and launches its kernel.
    #[command(hide = true)]
    ProfileTarget(commands::profile::ProfileTargetArgs),
    /// Internal: evaluate candidates sent as JSON lines on stdin (one child per GPU).
    #[command(hide = true)]
    Worker(commands::worker::WorkerArgs),
}
