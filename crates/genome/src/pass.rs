//! The pass a kernel computes: the forward (O from Q, K, V) or the backward (dQ, dK, dV
//! from dO). Each family belongs to one pass, and a search stays in one: a forward
//! kernel and a backward kernel are never candidates for the same job, so a forward
//! search must never propose a backward family (nor mutate into one), and vice versa.

use crate::gene::Gene;
use crate::genes::{Family, Genome};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Forward or backward.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// Every kernel and record from before the backward existed.
    #[default]
    Forward,
    Backward,
}

impl Pass {
    pub const ALL: [Pass; 2] = [Pass::Forward, Pass::Backward];

    pub fn label(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::Backward => "backward",
        }
    }

    /// The families of this pass, in allele order.
    pub fn families(self) -> impl Iterator<Item = Family> {
        Family::ALL
            .iter()
            .copied()
            .filter(move |f| f.pass() == self)
    }

    /// The genes that shape some family of this pass, in canonical order. A gene that
    /// shapes none (`dq_mode` in the forward) is held at its baseline by this pass's
    /// space, and draws nothing from a search's random numbers: a forward search makes
    /// the same draws it made before the backward genes existed.
    pub fn genes(self) -> Vec<Gene> {
        Gene::ALL
            .into_iter()
            .filter(|g| self.families().any(|f| g.applies(f)))
            .collect()
    }
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl Family {
    /// The pass this family's template computes.
    pub fn pass(self) -> Pass {
        match self {
            Family::Ampere | Family::Hopper => Pass::Forward,
            Family::AmpereBwd | Family::HopperBwd => Pass::Backward,
        }
    }
}

impl Genome {
    /// The pass this genome's kernel computes (its family's).
    pub fn pass(&self) -> Pass {
        self.family.pass()
    }
}
