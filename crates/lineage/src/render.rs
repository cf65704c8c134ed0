//! Lineage reports: the Markdown "evolution path" table, Graphviz DOT and SVG.

use crate::graph::{Lineage, Node, ParentRole};
use crate::operator::Operator;
use evo_record::Status;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use thiserror::Error;

/// The gene changes a node made relative to its primary parent, as `gene a→b` items.
///
/// Computed from the genomes, not from the operator list, so a mutation that a
/// later repair undid is not reported as a change.
pub fn gene_changes(lineage: &Lineage, node: &Node) -> String {
    let Some(parent) = lineage.primary_parent(&node.id) else {
        // A root: how it was made, and what repair changed to fit it into the space.
        let mut made = Vec::new();
        let mut repaired = Vec::new();
        for op in &node.operators {
            match op {
                Operator::Repair { gene, from, to } => repaired.push(format!("{gene} {from}→{to}")),
                other => made.push(other.to_string()),
            }
        }
        let mut text = made.join("; ");
        if !repaired.is_empty() {
            text.push_str(&format!(
                " (repaired into the space: {})",
                repaired.join(", ")
            ));
        }
        return text;
    };
    let mut items = Vec::new();
    // In a merged island lineage: a migrant, or a genome (a seed) both islands measured.
    if let (Some(from), Some(to)) = (parent.island, node.island) {
        if from != to {
            items.push(format!("parent measured on island {from}"));
        }
    }
    for op in &node.operators {
        if let Operator::Crossover { other } = op {
            let partner = lineage.get(other).map_or(other.to_string(), Node::label);
            items.push(format!("crossover with {partner}"));
        }
    }
    for gene in parent.genome.design_diff(&node.genome) {
        items.push(format!(
            "{gene} {}→{}",
            parent.genome.allele_label(gene),
            node.genome.allele_label(gene)
        ));
    }
    if items.is_empty() {
        items.push("no gene change".into());
    }
    items.join(", ")
}

fn green(node: &Node) -> String {
    let quoted = node.evaluation.as_ref().is_some_and(|e| {
        e.timings
            .iter()
            .all(|t| t.method == crate::seed::SEEDS_METHOD)
            && !e.timings.is_empty()
    });
    match node.status() {
        None => "not measured".into(),
        // A figure quoted from the seeds' notes was never through our gate.
        Some(Status::Ok) if quoted => "not gated (seeds' record)".into(),
        Some(Status::Ok) => "pass".into(),
        Some(Status::GreenFailed) => "FAIL".into(),
        Some(other) => format!("— ({other})"),
    }
}

fn fmt_us(us: Option<f64>) -> String {
    us.map_or("—".into(), |v| format!("{v:.1}"))
}

fn fmt_ratio(num: Option<f64>, den: Option<f64>) -> String {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => format!("{:.2}×", n / d),
        _ => "—".into(),
    }
}

/// The path from the root to `path`'s last node as a Markdown table (the seeds'
/// "evolution path": latency, speedup vs parent, cumulative speedup, GREEN).
pub fn path_table(lineage: &Lineage, path: &[&Node]) -> String {
    let mut out = String::new();
    out.push_str(
        "| step | version | gene changes | latency µs | vs parent | cumulative | GREEN |\n\
         |---:|---|---|---:|---:|---:|---|\n",
    );
    let root_us = path.first().and_then(|n| n.score_us());
    let mut parent_us = None;
    for (step, node) in path.iter().enumerate() {
        let us = node.score_us();
        let vs_parent = if step == 0 {
            "—".to_string()
        } else {
            fmt_ratio(parent_us, us)
        };
        let _ = writeln!(
            out,
            "| {step} | {} | {} | {} | {vs_parent} | {} | {} |",
            node.label(),
            gene_changes(lineage, node),
            fmt_us(us),
            fmt_ratio(root_us, us),
            green(node)
        );
        parent_us = us;
    }
    out
}

/// The Markdown report section of a lineage: heading, what it was measured on, and
/// the evolution path to the champion (or to the last node of a recorded lineage
/// without a champion, such as the seeds' partly measured one).
pub fn render_markdown(lineage: &Lineage) -> String {
    let mut out = String::new();
    let title = if lineage.meta.title.is_empty() {
        "lineage"
    } else {
        &lineage.meta.title
    };
    let _ = writeln!(out, "## Evolution path: {title}\n");
    let mut facts = Vec::new();
    if !lineage.meta.device.is_empty() {
        facts.push(format!("device: {}", lineage.meta.device));
    }
    if !lineage.meta.objective.is_empty() {
        facts.push(format!("objective: {}", lineage.meta.objective));
    }
    if !lineage.meta.strategy.is_empty() {
        facts.push(format!("strategy: {}", lineage.meta.strategy));
    }
    if let Some(seed) = lineage.meta.seed {
        facts.push(format!("seed: {seed}"));
    }
    let measured = lineage.nodes().filter(|n| n.evaluation.is_some()).count();
    let passed = lineage.nodes().filter(|n| n.score_us().is_some()).count();
    facts.push(format!(
        "{} nodes, {measured} measured, {passed} passed GREEN",
        lineage.len()
    ));
    let _ = writeln!(out, "{}\n", facts.join(" · "));
    // A lineage that is one chain (the seeds' hand evolution) is shown whole, so a
    // last step that has not been measured yet still appears.
    let chain = lineage.edges().count() + 1 == lineage.len()
        && lineage
            .edges()
            .all(|(_, _, role)| role == ParentRole::Primary)
        && lineage.nodes().all(|n| lineage.children(&n.id) <= 1);
    let last_path = || match lineage.nodes().last() {
        Some(last) => lineage.path_to(&last.id),
        None => Vec::new(),
    };
    let path = match lineage.champion() {
        Some(champion) => {
            let _ = writeln!(
                out,
                "Champion: **{}** ({}) at {} µs.\n",
                champion.label(),
                champion.genome.summary(),
                fmt_us(champion.score_us())
            );
            if chain {
                last_path()
            } else {
                lineage.path_to(&champion.id)
            }
        }
        None => {
            out.push_str("No candidate passed GREEN; the path shown ends at the last node.\n\n");
            last_path()
        }
    };
    out.push_str(&path_table(lineage, &path));
    out
}

/// Escapes a label for DOT; line breaks become DOT's `\n`.
fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Graphviz DOT of the whole lineage, the path to the champion drawn bold and red,
/// failed candidates grey, crossover partners dashed.
pub fn to_dot(lineage: &Lineage) -> String {
    let on_path: HashSet<&str> = lineage
        .champion_path()
        .iter()
        .map(|n| n.id.0.as_str())
        .collect();
    let mut out = String::from(
        "digraph lineage {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for node in lineage.nodes() {
        let mut label = node.label();
        label.push_str(&format!("\n{}", fmt_us(node.score_us())));
        if node.score_us().is_some() {
            label.push_str(" µs");
        }
        if let Some(status) = node.status().filter(|s| *s != Status::Ok) {
            label.push_str(&format!("\n{status}"));
        }
        let style = if on_path.contains(node.id.0.as_str()) {
            ", color=red, penwidth=2"
        } else if node.status().is_some_and(|s| s != Status::Ok) {
            ", color=grey, fontcolor=grey"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\"{style}];",
            node.id,
            dot_escape(&label)
        );
    }
    for (parent, child, role) in lineage.edges() {
        let label = match role {
            ParentRole::Primary => gene_changes(lineage, child),
            ParentRole::Secondary => "crossover partner".into(),
        };
        let style = match role {
            ParentRole::Secondary => ", style=dashed",
            ParentRole::Primary
                if on_path.contains(parent.id.0.as_str())
                    && on_path.contains(child.id.0.as_str()) =>
            {
                ", color=red, penwidth=2"
            }
            ParentRole::Primary => "",
        };
        let _ = writeln!(
            out,
            "  \"{}\" -> \"{}\" [label=\"{}\"{style}];",
            parent.id,
            child.id,
            dot_escape(&label)
        );
    }
    out.push_str("}\n");
    out
}

#[derive(Debug, Error)]
pub enum SvgError {
    #[error(
        "graphviz `dot` was not found on PATH; install graphviz (e.g. `apt install graphviz`) \
         to render SVG, or print the DOT text with --dot"
    )]
    GraphvizMissing,
    #[error("graphviz `dot -Tsvg` failed: {0}")]
    Graphviz(String),
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot write: {error}")]
    Write {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

/// Renders the DOT text to SVG with graphviz `dot -Tsvg` and writes it to `path`.
pub fn write_svg(lineage: &Lineage, path: &Path) -> Result<(), SvgError> {
    use std::io::Write;
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SvgError::GraphvizMissing,
            _ => SvgError::Graphviz(e.to_string()),
        })?;
    let dot = to_dot(lineage);
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(dot.as_bytes())
        .map_err(|e| SvgError::Graphviz(e.to_string()))?;
    let output = child
        .wait_with_output()
        .map_err(|e| SvgError::Graphviz(e.to_string()))?;
    if !output.status.success() {
        return Err(SvgError::Graphviz(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ));
    }
    std::fs::write(path, output.stdout).map_err(|error| SvgError::Write {
        path: path.to_path_buf(),
        error,
    })
}
