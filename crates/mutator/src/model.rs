//! A cost model as the search sees it: something that predicts, before a kernel is
//! compiled, how fast a genome will be on the search's objective, and learns from
//! each measurement the search makes (TVM's MetaSchedule and Ansor rank candidates
//! with one). The search crate holds only the interface; the learner lives in
//! `evo-costmodel`, so the loop stays free of any learning library.

use evo_genome::Genome;
use evo_record::Evaluation;
use std::fmt;
use std::sync::Arc;

/// One search's model: predicts and learns online.
pub trait CostModel: Send {
    /// A predicted cost per genome on this search's objective, lower is faster: a
    /// ranking, not microseconds (any monotone scale).
    fn predict(&mut self, genomes: &[Genome]) -> Vec<f64>;
    /// This search's own measurements, as they arrive (failures included: a genome
    /// that failed is one not to propose again).
    fn observe(&mut self, measured: &[Evaluation]);
    /// How well the model has predicted this search's measurements so far, in words,
    /// for the report.
    fn quality(&self) -> String;
}

/// What a search starts its model from: trained once (on other shapes' records), it
/// hands each search a fresh copy to update with that search's own measurements.
pub trait CostModelSource: Send + Sync {
    fn start(&self) -> Box<dyn CostModel>;
    /// What it was trained on, in words.
    fn describe(&self) -> String;
}

/// A shared model source, as a search configuration holds it.
#[derive(Clone)]
pub struct ModelHandle(pub Arc<dyn CostModelSource>);

impl ModelHandle {
    pub fn new(source: impl CostModelSource + 'static) -> ModelHandle {
        ModelHandle(Arc::new(source))
    }
}

impl fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelHandle({})", self.0.describe())
    }
}
