//! `evo evolve`'s report: `report.md` of an experiment, why a search stopped, and the
//! champion as the search prints it.

use evo_lineage::{render_insights, render_markdown, Lineage};
use evo_mutator::{ExperimentConfig, SearchOutcome, StopReason};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

pub(super) fn stop_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Budget => "budget spent",
        StopReason::Generations => "generation limit",
        StopReason::SpaceExhausted => "every reachable genome evaluated",
    }
}

pub(super) fn report(
    config: &ExperimentConfig,
    dir: &Path,
    backend: &str,
    outcome: &SearchOutcome,
    on_record: usize,
    plot_note: Option<&str>,
) -> String {
    let lineage: &Lineage = &outcome.lineage;
    let mut out = format!("# Experiment {}\n\n{backend}\n\n", config.name);
    let budget = match (config.budget.evaluations, config.budget.minutes) {
        (Some(n), _) => format!("{n} evaluations"),
        (None, Some(m)) => format!("{m} minutes"),
        (None, None) => "none".into(),
    };
    let _ = writeln!(
        out,
        "- strategy: {} (population {}, elites {}, tournament {}, crossover {}, mutation {}{}), seed {}, budget {budget}",
        config.strategy,
        config.evolutionary.population,
        config.evolutionary.elites,
        config.evolutionary.tournament,
        config.evolutionary.crossover_rate,
        config.evolutionary.mutation_rate,
        match (config.evolutionary.pipeline, config.evolutionary.in_flight) {
            (true, _) => ", pipelined generations".to_string(),
            (false, Some(n)) if config.evolutionary.steady => {
                format!(", steady-state with {n} in flight")
            }
            _ => String::new(),
        },
        config.seed
    );
    let _ = writeln!(
        out,
        "- device: {} · objective: {}",
        lineage.meta.device, lineage.meta.objective
    );
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for node in lineage.nodes() {
        if let Some(s) = node.status() {
            *by_status.entry(s.to_string()).or_default() += 1;
        }
    }
    let statuses = by_status
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "- {} evaluations ({} fresh, {} from the cache of {on_record} records): {statuses}; stopped: {}\n",
        outcome.evaluations,
        outcome.evaluations - outcome.cache_hits,
        outcome.cache_hits,
        stop_reason(outcome.stop)
    );
    match plot_note {
        None => out.push_str("![best so far](best_so_far.svg)\n\n"),
        Some(note) => {
            let _ = writeln!(out, "(no plot: {note})\n");
        }
    }
    if let Some(gates) = lineage
        .champion()
        .and_then(|c| c.evaluation.as_ref())
        .map(|e| &e.gates)
        .filter(|g| !g.is_empty())
    {
        let _ = writeln!(out, "- the champion passed: {}\n", gates.join("; "));
    }
    out.push_str(&render_markdown(lineage));
    out.push('\n');
    out.push_str(&render_insights(&evo_lineage::insights(
        std::slice::from_ref(lineage),
    )));
    let _ = writeln!(
        out,
        "\nReproduce: `evo evolve --experiment {}` (same seed, same measurements{}: same lineage).",
        dir.display(),
        match &config.model_data {
            Some(d) => format!(
                ", same records under the model's data {} (a folder that gained records since trains another model)",
                d.display()
            ),
            None => String::new(),
        }
    );
    out
}

/// The champion, the gates it passed and the path that led to it, as the search ends.
pub(super) fn print_champion(lineage: &Lineage) {
    match lineage.champion() {
        Some(c) => {
            // A named node's label is its name; an unnamed one's is already its id.
            let id = match &c.name {
                Some(name) => format!("{name} {}", c.id),
                None => c.id.to_string(),
            };
            println!(
                "champion: {id} at {:.2} µs\n  {}",
                c.score_us().unwrap_or_default(),
                c.genome.summary()
            );
            if let Some(gates) = c
                .evaluation
                .as_ref()
                .map(|e| &e.gates)
                .filter(|g| !g.is_empty())
            {
                println!("  gates passed: {}", gates.join("; "));
            }
        }
        None => println!("no candidate passed GREEN"),
    }
    println!();
    println!(
        "{}",
        evo_lineage::path_table(lineage, &lineage.champion_path())
    );
}
