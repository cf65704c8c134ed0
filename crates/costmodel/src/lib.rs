//! evo's cost model: ranks bred candidates before they are compiled and measured, so a
//! search spends its GPU time on the promising ones (TVM's MetaSchedule and Ansor do
//! the same).
//!
//! [`TrainingSet`] reads every evaluation recorded under an experiments folder, leaving
//! out the shapes the model will be judged on; [`ForestSource`] trains a random forest
//! on it ([`features`] says what it sees) and hands each search a copy that corrects
//! itself on that search's own measurements. The search loop knows the model only
//! through `evo_mutator::CostModel`.

pub mod features;
pub mod forest;
pub mod records;
pub mod validate;

pub use features::features;
pub use forest::{spearman, ForestSource, TrainError};
pub use records::{RecordsError, Row, Selection, TrainingSet, SNAPSHOT_SUFFIX};
pub use validate::{leave_one_shape_out, HeldOut};

/// `1 shape`, `12 shapes`: a count and its noun, for the messages.
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests;
