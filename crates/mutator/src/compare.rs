//! Comparing strategies on a recorded landscape: over many seeds, how close to the
//! landscape's optimum does each strategy get after a given number of evaluations?
//!
//! fraction = optimum µs / best found µs (1.0 = found the optimum, 0 = nothing passed).
//! The evolutionary runs start from random genomes, not the named seeds, so both
//! strategies start equally blind.

use crate::landscape::{Landscape, LandscapeEvaluator};
use crate::search::{search, Budget, SearchConfig, SearchError, Sinks, WallClock};
use crate::strategy::{EvolutionParams, StrategyKind};
use evo_lineage::{insights::median, LineageMeta};
use serde::Serialize;

/// The median fraction of the optimum per strategy and checkpoint.
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
    pub strategy: StrategyKind,
    /// Median fraction of the optimum at each checkpoint, same order as `checkpoints`.
    pub median_fraction: Vec<f64>,
}

/// Runs each strategy once per seed `0..seeds` with a budget of the last checkpoint.
pub fn compare_strategies(
    landscape: &Landscape,
    strategies: &[StrategyKind],
    params: &EvolutionParams,
    seeds: u64,
    checkpoints: &[usize],
) -> Result<Option<Comparison>, SearchError> {
    let Some((_, optimum)) = landscape.optimum() else {
        return Ok(None);
    };
    let budget = checkpoints.iter().copied().max().unwrap_or(0);
    let mut rows = Vec::new();
    for &strategy in strategies {
        let mut fractions: Vec<Vec<f64>> = vec![Vec::new(); checkpoints.len()];
        for seed in 0..seeds {
            let config = SearchConfig {
                strategy,
                params: params.clone(),
                budget: Budget::Evaluations(budget),
                seed,
                seeds: Vec::new(),
                meta: LineageMeta::default(),
                quiet: true,
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
                fractions[i].push(outcome.best_within(c).map_or(0.0, |b| optimum / b));
            }
        }
        rows.push(ComparisonRow {
            strategy,
            median_fraction: fractions
                .iter_mut()
                .map(|f| median(f).unwrap_or(0.0))
                .collect(),
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
    /// A Markdown table: one row per strategy, one column per checkpoint.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "Median fraction of the optimum ({:.2} µs on {}) over {} seeds, after N evaluations:\n\n| strategy |",
            self.optimum_us, self.device, self.seeds
        );
        for c in &self.checkpoints {
            out.push_str(&format!(" {c} |"));
        }
        out.push_str("\n|---|");
        for _ in &self.checkpoints {
            out.push_str("---:|");
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&format!("| {} |", row.strategy));
            for f in &row.median_fraction {
                out.push_str(&format!(" {f:.3} |"));
            }
            out.push('\n');
        }
        out
    }
}
