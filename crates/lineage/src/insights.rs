//! Insights: for each kind of gene change, how often it was tried and how often it helped.
//!
//! A change is attributed from the genomes: the genes on which a child differs
//! from its primary parent. Children of a crossover differ in many genes at once,
//! so their effect cannot be pinned on one gene; they are counted apart.

use crate::graph::Lineage;
use crate::operator::Operator;
use evo_genome::Gene;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// One kind of gene change: `warps 4→8`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GeneChange {
    pub gene: Gene,
    pub from: String,
    pub to: String,
}

impl fmt::Display for GeneChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}→{}", self.gene, self.from, self.to)
    }
}

/// How one kind of change fared.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeStats {
    /// Children that made this change and were measured.
    pub tried: usize,
    /// Of those, children that failed a gate (did not compile, wrong, crashed, hung).
    pub failed: usize,
    /// Of those, children faster than their parent (both timed).
    pub helped: usize,
    /// Median of parent µs / child µs over the pairs where both were timed.
    pub median_speedup: Option<f64>,
}

/// One observed change: where it was measured and what it did.
#[derive(Debug, Clone)]
struct Observation {
    change: Option<GeneChange>,
    device: String,
    objective: String,
    child_ok: bool,
    speedup: Option<f64>,
}

/// All the statistics `evo insights` prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Insights {
    /// Per change, over every lineage given.
    pub overall: Vec<(GeneChange, ChangeStats)>,
    /// Per device, per change.
    pub per_device: Vec<(String, Vec<(GeneChange, ChangeStats)>)>,
    /// Per objective (shape or suite), per change.
    pub per_objective: Vec<(String, Vec<(GeneChange, ChangeStats)>)>,
    /// Children of a crossover, all together.
    pub crossover: ChangeStats,
}

fn observations(lineages: &[Lineage]) -> Vec<Observation> {
    let mut out = Vec::new();
    for lineage in lineages {
        for node in lineage.nodes() {
            let (Some(parent), Some(eval)) =
                (lineage.primary_parent(&node.id), node.evaluation.as_ref())
            else {
                continue;
            };
            let device = if eval.device.is_empty() {
                lineage.meta.device.clone()
            } else {
                eval.device.clone()
            };
            let speedup = match (parent.score_us(), node.score_us()) {
                (Some(p), Some(c)) if c > 0.0 => Some(p / c),
                _ => None,
            };
            let base = Observation {
                change: None,
                device,
                objective: lineage.meta.objective.clone(),
                child_ok: node.score_us().is_some(),
                speedup,
            };
            let crossed = node
                .operators
                .iter()
                .any(|o| matches!(o, Operator::Crossover { .. }));
            if crossed {
                out.push(base);
                continue;
            }
            for gene in parent.genome.diff(&node.genome) {
                out.push(Observation {
                    change: Some(GeneChange {
                        gene,
                        from: parent.genome.allele_label(gene),
                        to: node.genome.allele_label(gene),
                    }),
                    ..base.clone()
                });
            }
        }
    }
    out
}

fn stats<'a>(obs: impl Iterator<Item = &'a Observation>) -> ChangeStats {
    let mut tried = 0;
    let mut failed = 0;
    let mut speedups = Vec::new();
    for o in obs {
        tried += 1;
        if !o.child_ok {
            failed += 1;
        }
        if let Some(s) = o.speedup {
            speedups.push(s);
        }
    }
    let helped = speedups.iter().filter(|&&s| s > 1.0).count();
    ChangeStats {
        tried,
        failed,
        helped,
        median_speedup: median(&mut speedups),
    }
}

/// Median (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

fn by_change(obs: &[&Observation]) -> Vec<(GeneChange, ChangeStats)> {
    let mut groups: BTreeMap<GeneChange, Vec<&Observation>> = BTreeMap::new();
    for o in obs {
        if let Some(c) = &o.change {
            groups.entry(c.clone()).or_default().push(o);
        }
    }
    let mut out: Vec<_> = groups
        .into_iter()
        .map(|(c, os)| (c, stats(os.into_iter())))
        .collect();
    // Most tried first; the BTreeMap order breaks ties deterministically.
    out.sort_by_key(|(_, s)| std::cmp::Reverse(s.tried));
    out
}

fn grouped(
    obs: &[Observation],
    key: impl Fn(&Observation) -> &str,
) -> Vec<(String, Vec<(GeneChange, ChangeStats)>)> {
    let mut groups: BTreeMap<String, Vec<&Observation>> = BTreeMap::new();
    for o in obs {
        groups.entry(key(o).to_string()).or_default().push(o);
    }
    groups
        .into_iter()
        .map(|(k, os)| (k, by_change(&os)))
        .filter(|(_, changes)| !changes.is_empty())
        .collect()
}

/// Computes the insights over one or more lineages (several experiments, devices, shapes).
pub fn insights(lineages: &[Lineage]) -> Insights {
    let obs = observations(lineages);
    let all: Vec<&Observation> = obs.iter().collect();
    Insights {
        overall: by_change(&all),
        per_device: grouped(&obs, |o| &o.device),
        per_objective: grouped(&obs, |o| &o.objective),
        crossover: stats(obs.iter().filter(|o| o.change.is_none())),
    }
}

fn table(out: &mut String, rows: &[(GeneChange, ChangeStats)]) {
    out.push_str(
        "| change | tried | failed | helped | median speedup |\n|---|---:|---:|---:|---:|\n",
    );
    for (change, s) in rows {
        let _ = writeln!(
            out,
            "| {change} | {} | {} | {} | {} |",
            s.tried,
            s.failed,
            s.helped,
            s.median_speedup
                .map_or("—".to_string(), |m| format!("{m:.2}×"))
        );
    }
}

/// The insights as Markdown: overall, per device, per objective.
pub fn render_insights(insights: &Insights) -> String {
    let mut out = String::from("## Gene changes: how often tried, how often they helped\n\n");
    out.push_str(
        "helped = child faster than its parent (both passed GREEN); speedup = parent µs / child µs.\n\n",
    );
    table(&mut out, &insights.overall);
    let c = &insights.crossover;
    let _ = writeln!(
        out,
        "\nCrossover children (not attributed to one gene): {} tried, {} failed, {} helped, median speedup {}.",
        c.tried,
        c.failed,
        c.helped,
        c.median_speedup
            .map_or("—".to_string(), |m| format!("{m:.2}×"))
    );
    if insights.per_device.len() > 1 {
        for (device, rows) in &insights.per_device {
            let _ = writeln!(out, "\n### Device: {device}\n");
            table(&mut out, rows);
        }
    }
    if insights.per_objective.len() > 1 {
        for (objective, rows) in &insights.per_objective {
            let _ = writeln!(out, "\n### Shape: {objective}\n");
            table(&mut out, rows);
        }
    }
    out
}

/// What won on one shape: where its champion started, the steps of its path that made
/// it faster, and how it differs from the genome it descends from (the seeds' "key
/// learnings", computed from a search's lineage).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyLearning {
    pub objective: String,
    pub device: String,
    /// The root of the champion's path (a named seed, or a random genome's id).
    pub root: String,
    pub root_us: Option<f64>,
    pub champion: String,
    pub champion_us: Option<f64>,
    /// Each step of the path that beat its parent: its gene changes and the speedup.
    pub wins: Vec<(String, f64)>,
    /// Genes on which the champion differs from the root, `gene a→b`.
    pub net: Vec<String>,
}

/// The key learnings of each lineage (one per search, so one per shape class when the
/// searches are per shape).
pub fn key_learnings(lineages: &[Lineage]) -> Vec<KeyLearning> {
    lineages
        .iter()
        .filter_map(|lineage| {
            let path = lineage.champion_path();
            let (root, champion) = (path.first()?, path.last()?);
            let wins = path
                .windows(2)
                .filter_map(|w| match (w[0].score_us(), w[1].score_us()) {
                    (Some(p), Some(c)) if c < p => {
                        Some((crate::render::gene_changes(lineage, w[1]), p / c))
                    }
                    _ => None,
                })
                .collect();
            let net = root
                .genome
                .design_diff(&champion.genome)
                .into_iter()
                .map(|g| {
                    format!(
                        "{g} {}→{}",
                        root.genome.allele_label(g),
                        champion.genome.allele_label(g)
                    )
                })
                .collect();
            Some(KeyLearning {
                objective: lineage.meta.objective.clone(),
                device: lineage.meta.device.clone(),
                root: root.label(),
                root_us: root.score_us(),
                champion: champion.label(),
                champion_us: champion.score_us(),
                wins,
                net,
            })
        })
        .collect()
}

/// The key learnings as Markdown, one section per shape.
pub fn render_key_learnings(learnings: &[KeyLearning]) -> String {
    let mut out = String::from("## Key learnings per shape: what won where\n");
    let us = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.2} µs"));
    for k in learnings {
        let _ = writeln!(
            out,
            "\n### {} ({})\n\nchampion {} at {}, from {} at {}{}",
            k.objective,
            k.device,
            k.champion,
            us(k.champion_us),
            k.root,
            us(k.root_us),
            match (k.root_us, k.champion_us) {
                (Some(r), Some(c)) if c > 0.0 => format!(" ({:.2}× along the path)", r / c),
                _ => String::new(),
            }
        );
        if k.wins.is_empty() {
            out.push_str("- no step of the path beat its parent: the seed itself won\n");
        }
        for (changes, x) in &k.wins {
            let _ = writeln!(out, "- {x:.2}×: {changes}");
        }
        if !k.net.is_empty() {
            let _ = writeln!(out, "- net change from {}: {}", k.root, k.net.join(", "));
        }
    }
    out
}
