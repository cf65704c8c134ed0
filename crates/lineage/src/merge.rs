//! Joining the lineages of an island-model search into one graph.
//!
//! Each island is its own experiment with its own `lineage.json`. An elite that one
//! island takes in from another appears there as an *immigrant*: a root carrying the
//! other island's measurement. Merging drops the immigrants and keeps the node that
//! measured the genome, so an island's child of an immigrant gets an edge from the
//! other island's node: a migration edge. (Islands that start from the same named
//! seeds each measure them; the merge keeps one node, and the other islands' children
//! of it get cross-island edges that are no migration.) Every node carries the island that measured
//! it. A genome that two islands measured on their own is kept once, as the merge
//! first reaches it; every measurement still stays in the merged `evaluations.jsonl`.
//!
//! The order is deterministic: the islands are visited round-robin in index order,
//! each adding its nodes in evaluation order for as long as their parents are in the
//! graph, so the same inputs give the same file, byte for byte. This never stalls on
//! complete inputs: a parent was measured before its child, so some island's next
//! node always has its parents in the graph.

use crate::graph::{Lineage, LineageError, LineageMeta, Node};
use evo_genome::GenomeId;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MergeError {
    #[error("no lineage to merge")]
    Empty,
    #[error("island {island} is given twice")]
    DuplicateIsland { island: u32 },
    #[error("island {first} was measured on `{first_device}` but island {other} on `{other_device}`; timings of two devices are never mixed")]
    Device {
        first: u32,
        first_device: String,
        other: u32,
        other_device: String,
    },
    #[error("island {first} optimised `{first_objective}` but island {other} `{other_objective}`; only searches of one objective merge")]
    Objective {
        first: u32,
        first_objective: String,
        other: u32,
        other_objective: String,
    },
    #[error("node {child} of island {island} descends from {parent}, which no given island measured; pass every island's experiment")]
    MissingParent {
        island: u32,
        child: GenomeId,
        parent: GenomeId,
    },
    #[error(transparent)]
    Lineage(#[from] LineageError),
}

/// What a merge did, for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeSummary {
    /// Nodes of the merged graph.
    pub nodes: usize,
    /// Edges from an immigrant to a child bred from it: the island took the parent in
    /// from the island that measured it. (A cross-island edge may also come from a
    /// genome both islands measured, such as a named seed; that is no migration.)
    pub migration_edges: usize,
    /// Immigrant nodes replaced by the node that measured them.
    pub immigrants: usize,
    /// Genomes measured by more than one island; the first node the merge reaches is kept.
    pub duplicates: usize,
}

/// Merges island lineages (`(island index, lineage)`) into one, titled `title`.
pub fn merge_islands(
    title: &str,
    islands: &[(u32, Lineage)],
) -> Result<(Lineage, MergeSummary), MergeError> {
    let mut islands: Vec<&(u32, Lineage)> = islands.iter().collect();
    islands.sort_by_key(|(k, _)| *k);
    let (first, head) = islands
        .first()
        .map(|(k, l)| (*k, l))
        .ok_or(MergeError::Empty)?;
    for pair in islands.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(MergeError::DuplicateIsland { island: pair[0].0 });
        }
    }
    for (k, l) in &islands {
        if l.meta.device != head.meta.device {
            return Err(MergeError::Device {
                first,
                first_device: head.meta.device.clone(),
                other: *k,
                other_device: l.meta.device.clone(),
            });
        }
        if l.meta.objective != head.meta.objective {
            return Err(MergeError::Objective {
                first,
                first_objective: head.meta.objective.clone(),
                other: *k,
                other_objective: l.meta.objective.clone(),
            });
        }
    }
    let mut summary = MergeSummary::default();
    // The nodes each island measured, in its evaluation order.
    let mut queues: Vec<(u32, &Lineage, Vec<&Node>)> = Vec::new();
    for (k, l) in &islands {
        let (immigrants, queue): (Vec<&Node>, Vec<&Node>) =
            l.nodes().partition(|n| n.is_immigrant());
        summary.immigrants += immigrants.len();
        queues.push((*k, l, queue));
    }
    let mut merged = Lineage::new(LineageMeta {
        title: title.to_string(),
        device: head.meta.device.clone(),
        objective: head.meta.objective.clone(),
        strategy: format!("{} ({} islands)", head.meta.strategy, islands.len()),
        seed: None,
    });
    let mut next = vec![0usize; queues.len()];
    loop {
        let mut progressed = false;
        for (q, (k, lineage, queue)) in queues.iter().enumerate() {
            while let Some(node) = queue.get(next[q]) {
                let parents: Vec<GenomeId> = lineage
                    .parents(&node.id)
                    .into_iter()
                    .map(|p| p.id.clone())
                    .collect();
                if !parents.iter().all(|p| merged.contains(p)) {
                    break;
                }
                if merged.contains(&node.id) {
                    summary.duplicates += 1;
                } else {
                    summary.migration_edges += lineage
                        .parents(&node.id)
                        .iter()
                        .filter(|p| p.is_immigrant())
                        .count();
                    let mut node = (*node).clone();
                    node.island = Some(*k);
                    merged.add(node, &parents)?;
                }
                next[q] += 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    // Whatever is left waits for a parent that no island measured.
    for (q, (k, lineage, queue)) in queues.iter().enumerate() {
        if let Some(node) = queue.get(next[q]) {
            let parent = lineage
                .parents(&node.id)
                .into_iter()
                .find(|p| !merged.contains(&p.id))
                .map(|p| p.id.clone())
                .expect("a node is held back only by a missing parent");
            return Err(MergeError::MissingParent {
                island: *k,
                child: node.id.clone(),
                parent,
            });
        }
    }
    summary.nodes = merged.len();
    Ok((merged, summary))
}
