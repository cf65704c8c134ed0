//! The search: genetic operators, strategies, the evaluation cache, the replay of
//! recorded landscapes, and the loop that ties them to an [`Evaluator`].
//!
//! Nothing here needs a GPU. The loop hands batches of genomes to an
//! [`Evaluator`] — the GPU worker, a [`LandscapeEvaluator`] replaying recorded
//! measurements, or a test fake — and records every result in the append-only
//! [`EvaluationCache`] and the [`evo_lineage::Lineage`]. Every random choice comes
//! from one seeded ChaCha8 RNG, so the same seed and the same measurements give
//! the same lineage, byte for byte; a steady-state search, which breeds as each
//! answer arrives, also needs the same order of answers, which its cache records.

pub mod cache;
pub mod compare;
pub mod evaluator;
pub mod experiment;
mod guided;
pub mod island;
pub mod landscape;
pub mod model;
pub mod operators;
pub mod search;
pub mod space;
mod steady;
pub mod strategy;

pub use cache::{CacheError, CacheKey, CacheRecord, CacheScope, EvaluationCache, LoadReport};
pub use compare::{compare_strategies, Comparison, ComparisonRow, Contender};
pub use evaluator::{Evaluator, EvaluatorError};
pub use experiment::{
    Backend, BudgetConfig, ConfigError, ExperimentConfig, EXPERIMENT_FILE, MAX_MINUTES,
};
pub use island::{Exchange, IslandConfig, IslandError, Migrant, MIGRANTS_FILE};
pub use landscape::{Landscape, LandscapeError, LandscapeEvaluator, LandscapeMeta, RecordLine};
pub use model::{CostModel, CostModelSource, ModelHandle};
pub use operators::{crossover, dedup, mutate, repair, Candidate};
pub use search::{
    search, Budget, Clock, SearchConfig, SearchError, SearchOutcome, Sinks, StopReason, WallClock,
};
pub use space::{AlleleLabel, SearchSpace, SpaceError, SubSpace};
pub use strategy::{EvolutionParams, StrategyKind};

#[cfg(test)]
mod tests;
