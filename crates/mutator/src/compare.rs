//! Comparing strategies on a recorded landscape: over many seeds, how close to the
//! landscape's optimum does each strategy get after a given number of evaluations?
//!
//! fraction = optimum µs / best found µs (1.0 = found the optimum, 0 = nothing passed).
//! The evolutionary runs start from random genomes, not the named seeds, so both
//! strategies start equally blind.

use crate::landscape::{Landscape, LandscapeEvaluator};
use crate::model::ModelHandle;
use crate::search::{search, Budget, SearchConfig, SearchError, Sinks, WallClock};
use crate::strategy::{EvolutionParams, StrategyKind};
use evo_lineage::{insights::median, LineageMeta};
use serde::Serialize;

/// The median fraction of the optimum per strategy and checkpoint, and how many seeds
/// had found the optimum itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub landscape: String,
    pub device: String,
    pub optimum_us: f64,
    pub seeds: u64,
    pub checkpoints: Vec<usize>,
    pub rows: Vec<ComparisonRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonRow {
    /// The row's name in the tables: the strategy, and how it was run.
    pub label: String,
    pub strategy: StrategyKind,
    /// Median fraction of the optimum at each checkpoint, same order as `checkpoints`.
    pub median_fraction: Vec<f64>,
    /// How many of the seeds had found the optimum itself by each checkpoint (on a
    /// landscape with a needle the median hides how many never get there).
    pub at_optimum: Vec<u64>,
}

/// One row of a comparison: a strategy with its parameters, and its name in the tables.
#[derive(Debug, Clone)]
pub struct Contender {
    pub label: String,
    pub strategy: StrategyKind,
    pub params: EvolutionParams,
    /// The guided strategy's cost model.
    pub model: Option<ModelHandle>,
}

impl Contender {
    /// The strategy under its own name.
    pub fn new(strategy: StrategyKind, params: &EvolutionParams) -> Contender {
        Contender {
            label: strategy.to_string(),
            strategy,
            params: params.clone(),
            model: None,
        }
    }
}

/// Runs each contender once per seed `0..seeds` with a budget of the last checkpoint.
pub fn compare_strategies(
    landscape: &Landscape,
    contenders: &[Contender],
    seeds: u64,
    checkpoints: &[usize],
) -> Result<Option<Comparison>, SearchError> {
    let Some((_, optimum)) = landscape.optimum() else {
        return Ok(None);
    };
    let budget = checkpoints.iter().copied().max().unwrap_or(0);
    let mut rows = Vec::new();
    for contender in contenders {
        let mut fractions: Vec<Vec<f64>> = vec![Vec::new(); checkpoints.len()];
        let mut at_optimum = vec![0; checkpoints.len()];
        for seed in 0..seeds {
            let config = SearchConfig {
                strategy: contender.strategy,
                params: contender.params.clone(),
                budget: Budget::Evaluations(budget),
                seed,
                seeds: Vec::new(),
                meta: LineageMeta::default(),
                quiet: true,
                model: contender.model.clone(),
            };
            let mut evaluator = LandscapeEvaluator::new(landscape.clone());
            let outcome = search(
                &config,
                landscape.space(),
                &mut evaluator,
                Sinks::default(),
                &WallClock::start(),
            )?;
            for (i, &c) in checkpoints.iter().enumerate() {
                let best = outcome.best_within(c);
                fractions[i].push(best.map_or(0.0, |b| optimum / b));
                at_optimum[i] += u64::from(best.is_some_and(|b| b <= optimum));
            }
        }
        rows.push(ComparisonRow {
            label: contender.label.clone(),
            strategy: contender.strategy,
            median_fraction: fractions
                .iter_mut()
                .map(|f| median(f).unwrap_or(0.0))
                .collect(),
            at_optimum,
        });
    }
    Ok(Some(Comparison {
        landscape: landscape.dir.display().to_string(),
        device: landscape.meta.device.clone(),
        optimum_us: optimum,
        seeds,
        checkpoints: checkpoints.to_vec(),
        rows,
    }))
}

impl Comparison {
    /// Two Markdown tables, one row per strategy and one column per checkpoint: the
    /// median fraction of the optimum, then the seeds that had found the optimum.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "Median fraction of the optimum ({:.2} µs on {}) over {} seeds, after N evaluations:\n\n",
            self.optimum_us, self.device, self.seeds
        );
        self.push_table(&mut out, |row| {
            row.median_fraction
                .iter()
                .map(|f| format!("{f:.3}"))
                .collect()
        });
        out.push_str(&format!(
            "\nSeeds (of {}) that had found the optimum itself, after N evaluations:\n\n",
            self.seeds
        ));
        self.push_table(&mut out, |row| {
            row.at_optimum.iter().map(u64::to_string).collect()
        });
        out
    }

    fn push_table(&self, out: &mut String, cells: impl Fn(&ComparisonRow) -> Vec<String>) {
        out.push_str("| strategy |");
        for c in &self.checkpoints {
            out.push_str(&format!(" {c} |"));
        }
        out.push_str("\n|---|");
        for _ in &self.checkpoints {
            out.push_str("---:|");
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&format!("| {} |", row.label));
            for cell in cells(row) {
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
    }
}
