//! How well the model predicts a shape it never saw: for each recorded shape, a forest
//! trained on every other shape's rows ranks that shape's recorded genomes. What it
//! says is the figure a user can hold the model to before trusting it with a search.

use crate::forest::{spearman, ForestSource, TrainError};
use crate::records::{Row, TrainingSet};
use evo_genome::Problem;
use evo_mutator::CostModelSource;
use serde::Serialize;

/// One held-out shape.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    pub shape: String,
    /// Its recorded genomes.
    pub rows: usize,
    /// Spearman's ρ of the model's predictions and the measured times.
    pub spearman: Option<f64>,
    /// The measured time of the genome the model ranks first, over the shape's best
    /// (1.0: the model's first pick is the fastest recorded).
    pub first_pick_over_best: f64,
    /// Of the model's ten first picks, the best's measured time over the shape's best.
    pub best_of_ten_over_best: f64,
}

/// Leaves out each shape with at least `min_rows` rows in turn.
pub fn leave_one_shape_out(set: &TrainingSet, min_rows: usize) -> Result<Vec<HeldOut>, TrainError> {
    let mut shapes: Vec<Problem> = set.rows.iter().map(|r| r.problem).collect();
    shapes.sort_by_key(Problem::label);
    shapes.dedup();
    let mut out = Vec::new();
    for shape in shapes {
        let (held, rest): (Vec<&Row>, Vec<&Row>) =
            set.rows.iter().partition(|r| r.problem == shape);
        if held.len() < min_rows || rest.is_empty() {
            continue;
        }
        let train = TrainingSet {
            rows: rest.into_iter().cloned().collect(),
            shapes: set.shapes - 1,
            files: set.files,
            left_out: held.len(),
        };
        let mut model = ForestSource::train(&train, shape)?.start();
        let genomes: Vec<_> = held.iter().map(|r| r.genome).collect();
        let predicted = model.predict(&genomes);
        let pairs: Vec<(f64, f64)> = predicted
            .iter()
            .zip(&held)
            .map(|(p, r)| (*p, r.log_ratio))
            .collect();
        let mut order: Vec<usize> = (0..held.len()).collect();
        order.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]));
        let best = held.iter().map(|r| r.us).fold(f64::INFINITY, f64::min);
        let top = |k: usize| {
            order
                .iter()
                .take(k)
                .map(|&i| held[i].us)
                .fold(f64::INFINITY, f64::min)
                / best
        };
        out.push(HeldOut {
            shape: shape.label(),
            rows: held.len(),
            spearman: spearman(&pairs),
            first_pick_over_best: top(1),
            best_of_ten_over_best: top(10),
        });
    }
    Ok(out)
}
