//! The lineage graph: every evaluated candidate is a node, every edge the operator
//! that made a child from its parent.
//!
//! A search's result is not only its champion but how it got there: which gene
//! changes helped, which failed, and on which device. This crate keeps that record
//! ([`Lineage`], persisted as `lineage.json`), renders it as the seeds' "evolution
//! path" table, DOT and SVG ([`render`]), mines it for which changes pay off
//! ([`insights`]), and plots the best-so-far curve ([`plot`]). It knows no GPU.

pub mod graph;
pub mod insights;
pub mod merge;
pub mod operator;
pub mod plot;
pub mod render;
pub mod seed;

pub use graph::{write_atomic, Lineage, LineageError, LineageMeta, Node, ParentRole};
pub use insights::{
    insights, key_learnings, render_insights, render_key_learnings, ChangeStats, GeneChange,
    Insights, KeyLearning,
};
pub use merge::{merge_islands, MergeError, MergeSummary};
pub use operator::Operator;
pub use plot::{plot_best_so_far, PlotError};
pub use render::{gene_changes, path_table, render_markdown, to_dot, write_svg, SvgError};
pub use seed::{seed_lineage, seeds_record, SeedLineageError, SEEDS_DEVICE, SEED_PATH};

#[cfg(test)]
mod tests;
