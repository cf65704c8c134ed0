//! The lineage graph and its JSON file.
//!
//! Nodes are evaluated candidates in the order they were evaluated; an edge
//! points from a parent to its child. A child made by crossover has two parents:
//! the *primary* edge comes from the parent the child was copied from (the path
//! to the root follows it), the *secondary* edge from the crossover partner. The
//! operators that made a child live on the child node, once, rather than being
//! split over two edges.
//!
//! On disk the graph is a plain list of nodes and edges (`lineage.json`), not
//! petgraph's internal layout, so the file stays readable and stable if the
//! in-memory representation changes.

use crate::operator::Operator;
use evo_genome::{Genome, GenomeId};
use evo_record::{Evaluation, Status};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The version written in `lineage.json`; bumped only for changes old readers cannot skip.
pub const FORMAT: u32 = 1;

/// Which parent an edge comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentRole {
    /// The parent the child was copied from before any change.
    Primary,
    /// The crossover partner.
    Secondary,
}

/// What the lineage as a whole is about.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineageMeta {
    /// A title for reports, e.g. `seeds' hand evolution` or the experiment name.
    #[serde(default)]
    pub title: String,
    /// Device the evaluations were measured on, as the driver names it.
    #[serde(default)]
    pub device: String,
    /// The objective: a problem label (`B1 H8 L512 D64 f16`) or a suite label.
    #[serde(default)]
    pub objective: String,
    /// `evolutionary`, `random`, `exhaustive`, or `hand` for the seeds.
    #[serde(default)]
    pub strategy: String,
    /// The RNG seed of the search, when there was one.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// One evaluated (or, for a recorded hand lineage, possibly unmeasured) candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: GenomeId,
    pub genome: Genome,
    /// The genome's name when it came from `genomes/*.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Generation (or batch) in which it was evaluated; 0 for seeds.
    pub generation: u32,
    /// How it was made, in order.
    pub operators: Vec<Operator>,
    /// The gate results; `None` only for nodes of a recorded lineage never measured here.
    #[serde(default)]
    pub evaluation: Option<Evaluation>,
    /// The island whose search measured it, in an island-model search; for an
    /// immigrant, the island it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub island: Option<u32>,
}

impl Node {
    /// The node's status; `None` when unmeasured.
    pub fn status(&self) -> Option<Status> {
        self.evaluation.as_ref().map(|e| e.status)
    }

    /// The objective in µs when the evaluation passed GREEN and was timed.
    pub fn score_us(&self) -> Option<f64> {
        self.evaluation
            .as_ref()
            .filter(|e| e.is_ok())
            .and_then(|e| e.score_us)
    }

    /// Taken in from another island with that island's measurement, not measured here.
    pub fn is_immigrant(&self) -> bool {
        matches!(self.operators.first(), Some(Operator::Immigrant { .. }))
    }

    /// The name, or the id when the genome has no name.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.id.to_string())
    }
}

/// Errors building, reading or writing a lineage; each names the node or the file.
#[derive(Debug, Error)]
pub enum LineageError {
    #[error("genome {0} is already in the lineage (nodes are unique by canonical id)")]
    Duplicate(GenomeId),
    #[error("parent {parent} of {child} is not in the lineage; add parents before children")]
    UnknownParent { parent: GenomeId, child: GenomeId },
    #[error("genome {0} is not in the lineage")]
    UnknownNode(GenomeId),
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot read: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot write: {error}")]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}:{line}:{column}: not a lineage file: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{path}: lineage format {found} is newer than this evo understands ({FORMAT}); update evo"
    )]
    Format { path: PathBuf, found: u32 },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The lineage of one experiment (or of the seeds' hand evolution).
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    pub meta: LineageMeta,
    /// Seconds of wall time the search has spent, over all its runs, when it runs to a
    /// wall budget (`--minutes`): a resumed search goes on from there. `None` for an
    /// evaluation budget and for lineages that are not a search's.
    pub wall_s: Option<f64>,
    graph: DiGraph<Node, ParentRole>,
    index: HashMap<GenomeId, NodeIndex>,
}

/// The serialized form: nodes in evaluation order, then edges.
#[derive(Serialize, Deserialize)]
struct LineageFile {
    format: u32,
    #[serde(default)]
    meta: LineageMeta,
    /// Absent unless set: lineages without a wall budget are written as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wall_s: Option<f64>,
    nodes: Vec<Node>,
    edges: Vec<EdgeRecord>,
}

#[derive(Serialize, Deserialize)]
struct EdgeRecord {
    parent: GenomeId,
    child: GenomeId,
    role: ParentRole,
}

impl Lineage {
    pub fn new(meta: LineageMeta) -> Lineage {
        Lineage {
            meta,
            ..Lineage::default()
        }
    }

    /// Adds a node. `parents` lists the primary parent first, then a crossover partner.
    pub fn add(&mut self, node: Node, parents: &[GenomeId]) -> Result<(), LineageError> {
        if self.index.contains_key(&node.id) {
            return Err(LineageError::Duplicate(node.id));
        }
        let parent_indices = parents
            .iter()
            .map(|p| {
                self.index
                    .get(p)
                    .copied()
                    .ok_or_else(|| LineageError::UnknownParent {
                        parent: p.clone(),
                        child: node.id.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let id = node.id.clone();
        let child = self.graph.add_node(node);
        self.index.insert(id, child);
        for (i, parent) in parent_indices.into_iter().enumerate() {
            let role = if i == 0 {
                ParentRole::Primary
            } else {
                ParentRole::Secondary
            };
            self.graph.add_edge(parent, child, role);
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    pub fn contains(&self, id: &GenomeId) -> bool {
        self.index.contains_key(id)
    }

    pub fn get(&self, id: &GenomeId) -> Option<&Node> {
        self.index.get(id).map(|&i| &self.graph[i])
    }

    /// Records (or replaces) the evaluation of a node, e.g. when a lineage is replayed.
    pub fn set_evaluation(
        &mut self,
        id: &GenomeId,
        evaluation: Evaluation,
    ) -> Result<(), LineageError> {
        let &i = self
            .index
            .get(id)
            .ok_or_else(|| LineageError::UnknownNode(id.clone()))?;
        self.graph[i].evaluation = Some(evaluation);
        Ok(())
    }

    /// Nodes in the order they were added (the evaluation order of a search).
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.graph.node_indices().map(move |i| &self.graph[i])
    }

    /// `(parent, child, role)` for every edge, in insertion order.
    pub fn edges(&self) -> impl Iterator<Item = (&Node, &Node, ParentRole)> {
        self.graph.edge_references().map(move |e| {
            (
                &self.graph[e.source()],
                &self.graph[e.target()],
                *e.weight(),
            )
        })
    }

    /// The parent a node was copied from; `None` for a root.
    pub fn primary_parent(&self, id: &GenomeId) -> Option<&Node> {
        let &i = self.index.get(id)?;
        self.graph
            .edges_directed(i, Direction::Incoming)
            .find(|e| *e.weight() == ParentRole::Primary)
            .map(|e| &self.graph[e.source()])
    }

    /// The parents of a node, primary first; empty for a root or an unknown id.
    pub fn parents(&self, id: &GenomeId) -> Vec<&Node> {
        let Some(&i) = self.index.get(id) else {
            return Vec::new();
        };
        let mut edges: Vec<_> = self.graph.edges_directed(i, Direction::Incoming).collect();
        edges.sort_by_key(|e| *e.weight() == ParentRole::Secondary);
        edges.iter().map(|e| &self.graph[e.source()]).collect()
    }

    /// Number of children of a node.
    pub fn children(&self, id: &GenomeId) -> usize {
        self.index.get(id).map_or(0, |&i| {
            self.graph.edges_directed(i, Direction::Outgoing).count()
        })
    }

    /// The fastest node that passed GREEN (ties: the one evaluated first).
    pub fn champion(&self) -> Option<&Node> {
        let mut best: Option<(&Node, f64)> = None;
        for node in self.nodes() {
            if let Some(us) = node.score_us() {
                if best.is_none_or(|(_, b)| us < b) {
                    best = Some((node, us));
                }
            }
        }
        best.map(|(n, _)| n)
    }

    /// The nodes from the root to `id`, following primary parents.
    pub fn path_to(&self, id: &GenomeId) -> Vec<&Node> {
        let mut path = Vec::new();
        let mut current = self.get(id);
        while let Some(node) = current {
            path.push(node);
            current = self.primary_parent(&node.id);
        }
        path.reverse();
        path
    }

    /// The path from the root to the champion (empty when nothing passed GREEN).
    pub fn champion_path(&self) -> Vec<&Node> {
        match self.champion() {
            Some(c) => self.path_to(&c.id),
            None => Vec::new(),
        }
    }

    /// Best objective so far after each measured evaluation: `(evaluations, best µs)`,
    /// starting at the first evaluation that passed GREEN. Immigrants are another
    /// island's evaluations and do not count.
    pub fn best_so_far(&self) -> Vec<(usize, f64)> {
        let mut out = Vec::new();
        let mut best = f64::INFINITY;
        let measured = self
            .nodes()
            .filter(|n| n.evaluation.is_some() && !n.is_immigrant());
        for (i, node) in measured.enumerate() {
            if let Some(us) = node.score_us() {
                best = best.min(us);
            }
            if best.is_finite() {
                out.push((i + 1, best));
            }
        }
        out
    }

    /// Pretty JSON of the whole lineage; deterministic for a given lineage.
    pub fn to_json(&self) -> String {
        let file = LineageFile {
            format: FORMAT,
            meta: self.meta.clone(),
            wall_s: self.wall_s,
            nodes: self.nodes().cloned().collect(),
            edges: self
                .edges()
                .map(|(p, c, role)| EdgeRecord {
                    parent: p.id.clone(),
                    child: c.id.clone(),
                    role,
                })
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&file).expect("a lineage always serializes");
        text.push('\n');
        text
    }

    /// Parses JSON text; `path` only labels errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Lineage, LineageError> {
        let file: LineageFile = serde_json::from_str(text).map_err(|e| LineageError::Parse {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if file.format > FORMAT {
            return Err(LineageError::Format {
                path: path.to_path_buf(),
                found: file.format,
            });
        }
        let mut parents: HashMap<GenomeId, Vec<(ParentRole, GenomeId)>> = HashMap::new();
        for e in file.edges {
            parents.entry(e.child).or_default().push((e.role, e.parent));
        }
        if let Some(s) = file.wall_s.filter(|s| !(s.is_finite() && *s >= 0.0)) {
            return Err(LineageError::Invalid {
                path: path.to_path_buf(),
                message: format!("wall_s = {s} is not a number of seconds spent"),
            });
        }
        let mut lineage = Lineage::new(file.meta);
        lineage.wall_s = file.wall_s;
        for node in file.nodes {
            let mut ps = parents.remove(&node.id).unwrap_or_default();
            // Primary first, whatever order the file lists them in.
            ps.sort_by_key(|(role, _)| *role == ParentRole::Secondary);
            let ids: Vec<GenomeId> = ps.into_iter().map(|(_, id)| id).collect();
            lineage.add(node, &ids).map_err(|e| LineageError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        }
        if let Some(child) = parents.keys().next() {
            return Err(LineageError::Invalid {
                path: path.to_path_buf(),
                message: format!("an edge points to {child}, which is not a node"),
            });
        }
        Ok(lineage)
    }

    /// Reads `lineage.json`, or `lineage.json.gz` beside it when only that one exists
    /// (experiment folders are committed with their large files gzipped).
    pub fn load(path: &Path) -> Result<Lineage, LineageError> {
        let read_error = |path: PathBuf, error| LineageError::Read { path, error };
        match evo_record::gz::read_plain_or_gz(path) {
            Ok(Some((read, text))) => Lineage::from_json(&text, &read),
            Ok(None) => Err(read_error(
                path.to_path_buf(),
                std::io::ErrorKind::NotFound.into(),
            )),
            Err((read, source)) => Err(read_error(read, source)),
        }
    }

    /// Writes the file atomically (a temporary file in the same folder, then a rename),
    /// so an interrupted search never leaves a half-written lineage behind.
    pub fn save(&self, path: &Path) -> Result<(), LineageError> {
        write_atomic(path, self.to_json().as_bytes()).map_err(|error| LineageError::Write {
            path: path.to_path_buf(),
            error,
        })
    }
}

pub use evo_record::files::write_atomic;

#[cfg(test)]
mod tests {
    use super::*;

    /// A lineage without a wall time is written as before; one with it keeps it.
    #[test]
    fn wall_time_is_written_only_when_set_and_read_back() {
        let mut lineage = Lineage::new(LineageMeta::default());
        let plain = lineage.to_json();
        assert!(!plain.contains("wall_s"), "{plain}");
        let path = Path::new("lineage.json");
        assert_eq!(Lineage::from_json(&plain, path).unwrap().wall_s, None);
        lineage.wall_s = Some(564.25);
        let timed = lineage.to_json();
        assert!(timed.contains("\"wall_s\": 564.25"), "{timed}");
        let back = Lineage::from_json(&timed, path).unwrap();
        assert_eq!((back.wall_s, back.to_json()), (Some(564.25), timed.clone()));
        let negative = timed.replace("564.25", "-1.0");
        let err = Lineage::from_json(&negative, path).unwrap_err().to_string();
        assert!(
            err.contains("wall_s = -1 is not a number of seconds"),
            "{err}"
        );
    }
}
