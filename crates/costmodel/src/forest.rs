//! The model: a random forest (smartcore's) trained once on the recorded evaluations of
//! other shapes, and a second, small forest per search fitted to what the first got
//! wrong on this search's own measurements. The first carries what other shapes taught
//! (TMA beats plain loads, one consumer warpgroup fills more SMs at 512 rows); the
//! second learns this shape's corrections as the search measures, refitted after every
//! batch (a few hundred rows: milliseconds).
//!
//! Predictions are ln(time relative to a shape's fastest): a ranking. The quality
//! report compares each measured genome's prediction, made before it was measured,
//! with what was measured (Spearman's rank correlation).

use crate::features::features;
use crate::records::TrainingSet;
use evo_genome::{Genome, GenomeId, Problem};
use evo_mutator::{CostModel, CostModelSource};
use evo_record::Evaluation;
use smartcore::ensemble::random_forest_regressor::{
    RandomForestRegressor, RandomForestRegressorParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;
use std::collections::HashMap;
use std::sync::Arc;
use thiserror::Error;

type Forest = RandomForestRegressor<f64, f64, DenseMatrix<f64>, Vec<f64>>;

/// Trees of the forest trained on the records.
const BASE_TREES: usize = 80;
/// Trees of the per-search correction.
const ONLINE_TREES: usize = 40;
/// Below this many of its own measurements a search trusts the records alone.
const ONLINE_MIN: usize = 8;

#[derive(Debug, Error)]
#[error("the cost model could not be trained: {0}")]
pub struct TrainError(String);

fn params(trees: usize, features: usize, seed: u64) -> RandomForestRegressorParameters {
    RandomForestRegressorParameters::default()
        .with_n_trees(trees)
        .with_max_depth(16)
        .with_min_samples_leaf(2)
        .with_m((features / 3).max(1))
        .with_seed(seed)
}

fn fit(x: &[Vec<f64>], y: &[f64], trees: usize, seed: u64) -> Result<Forest, TrainError> {
    let m = DenseMatrix::from_2d_vec(&x.to_vec()).map_err(|e| TrainError(e.to_string()))?;
    Forest::fit(&m, &y.to_vec(), params(trees, x[0].len(), seed))
        .map_err(|e| TrainError(e.to_string()))
}

fn predict(forest: &Forest, x: &[Vec<f64>]) -> Vec<f64> {
    if x.is_empty() {
        return Vec::new();
    }
    DenseMatrix::from_2d_vec(&x.to_vec())
        .ok()
        .and_then(|m| forest.predict(&m).ok())
        // A forest fitted to finite rows predicts finite values; should it fail, every
        // candidate ranks alike and the search falls back on its breeding order.
        .unwrap_or_else(|| vec![0.0; x.len()])
}

/// A forest trained on the records, for searches on one problem.
pub struct ForestSource {
    base: Arc<Forest>,
    problem: Problem,
    description: String,
}

impl ForestSource {
    /// Trains the records' forest (seconds for tens of thousands of rows).
    pub fn train(set: &TrainingSet, problem: Problem) -> Result<ForestSource, TrainError> {
        if set.rows.is_empty() {
            return Err(TrainError("no training rows".into()));
        }
        let x: Vec<Vec<f64>> = set
            .rows
            .iter()
            .map(|r| features(&r.genome, &r.problem))
            .collect();
        let y: Vec<f64> = set.rows.iter().map(|r| r.log_ratio).collect();
        let base = fit(&x, &y, BASE_TREES, 2026)?;
        Ok(ForestSource {
            base: Arc::new(base),
            problem,
            description: format!(
                "random forest ({BASE_TREES} trees) on {} of {} other {} from {} ({} of the left-out shapes passed over), corrected online",
                crate::count(set.rows.len(), "recorded genome"),
                set.shapes,
                if set.shapes == 1 { "shape" } else { "shapes" },
                crate::count(set.files, "file"),
                crate::count(set.left_out, "record")
            ),
        })
    }
}

impl CostModelSource for ForestSource {
    fn start(&self) -> Box<dyn CostModel> {
        Box::new(Online {
            base: Arc::clone(&self.base),
            problem: self.problem,
            correction: None,
            own: Vec::new(),
            predicted: HashMap::new(),
            pairs: Vec::new(),
            fitted: 0,
        })
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

/// One search's model.
struct Online {
    base: Arc<Forest>,
    problem: Problem,
    /// Fitted to ln(µs) minus the base prediction on this search's measurements.
    correction: Option<Forest>,
    /// This search's measurements that passed: features and ln(µs) − base prediction.
    own: Vec<(Vec<f64>, f64)>,
    /// The last prediction of every genome proposed, to judge it once measured.
    predicted: HashMap<GenomeId, f64>,
    /// (prediction before measuring, ln measured µs) of every measured genome.
    pairs: Vec<(f64, f64)>,
    /// How many of `own` the correction was last fitted to.
    fitted: usize,
}

impl CostModel for Online {
    fn predict(&mut self, genomes: &[Genome]) -> Vec<f64> {
        let x: Vec<Vec<f64>> = genomes.iter().map(|g| features(g, &self.problem)).collect();
        let mut out = predict(&self.base, &x);
        if let Some(c) = &self.correction {
            for (o, d) in out.iter_mut().zip(predict(c, &x)) {
                *o += d;
            }
        }
        for (g, p) in genomes.iter().zip(&out) {
            self.predicted.insert(g.id(), *p);
        }
        out
    }

    fn observe(&mut self, measured: &[Evaluation]) {
        let passed: Vec<(&Evaluation, f64)> = measured
            .iter()
            .filter_map(|e| Some((e, e.score_us.filter(|us| e.is_ok() && *us > 0.0)?)))
            .collect();
        let x: Vec<Vec<f64>> = passed
            .iter()
            .map(|(e, _)| features(&e.genome, &self.problem))
            .collect();
        let base = predict(&self.base, &x);
        for (((e, us), x), base) in passed.into_iter().zip(x).zip(base) {
            if let Some(p) = self.predicted.get(&e.genome_id) {
                self.pairs.push((*p, us.ln()));
            }
            self.own.push((x, us.ln() - base));
        }
        // A batch refits the correction; answers that come one at a time (the
        // steady-state search) refit it once an eighth more of them has arrived, so
        // the refits cost O(n log n) over a search, not O(n^2).
        let n = self.own.len();
        let due = measured.len() > 1 || n >= self.fitted + (n / 8).max(1);
        if n >= ONLINE_MIN && due {
            let (x, y): (Vec<Vec<f64>>, Vec<f64>) = self.own.iter().cloned().unzip();
            self.correction = fit(&x, &y, ONLINE_TREES, n as u64).ok();
            self.fitted = n;
        }
    }

    fn quality(&self) -> String {
        match spearman(&self.pairs) {
            Some(rho) => format!(
                "predicted the order of the {} genomes it ranked before they were measured with Spearman ρ = {rho:.2}",
                self.pairs.len()
            ),
            None => "too few measured genomes to judge its predictions".into(),
        }
    }
}

/// Spearman's rank correlation of the pairs, `None` below three.
pub fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let ranks = |values: Vec<f64>| -> Vec<f64> {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        let mut r = vec![0.0; values.len()];
        let mut i = 0;
        while i < order.len() {
            // Ties share the mean of their ranks.
            let mut j = i;
            while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
                j += 1;
            }
            for k in i..=j {
                r[order[k]] = (i + j) as f64 / 2.0;
            }
            i = j + 1;
        }
        r
    };
    let a = ranks(pairs.iter().map(|p| p.0).collect());
    let b = ranks(pairs.iter().map(|p| p.1).collect());
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}
