//! The space a search may move in: every gene's allowed alleles, checked against
//! the validity rules for one head dimension on one device.
//!
//! The full space allows every allele. A *sub-space* fixes every gene to a base
//! genome except the listed ones; a recorded landscape declares one, and a search
//! replaying that landscape must stay inside it, because outside it there are no
//! measurements and replay never invents numbers.
//!
//! Every space is of one [`Pass`]: a forward search never proposes a backward kernel
//! (nor mutates or repairs into one), and a backward search no forward kernel. The full
//! space of a pass allows every allele of the genes that shape its families and holds
//! the others at their baseline; [`SearchSpace::full`] is the forward's, unchanged.

use evo_genome::{Family, Gene, Genome, HeadDim, Pass, Target, GENES};
use rand::Rng;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use thiserror::Error;

/// Sub-spaces up to this many points keep the list of their valid points, so that
/// sampling is exact and an exhaustive walk is possible.
pub const ENUMERABLE: u128 = 1 << 20;

/// An allele as written in TOML: a number (`64`) or a word (`"cp_async"`, `"none"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlleleLabel(pub String);

impl Serialize for AlleleLabel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.parse::<u32>() {
            Ok(n) => n.serialize(s),
            Err(_) => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for AlleleLabel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Number(u32),
            Word(String),
        }
        match Repr::deserialize(d) {
            Ok(Repr::Number(n)) => Ok(AlleleLabel(n.to_string())),
            Ok(Repr::Word(w)) => Ok(AlleleLabel(w)),
            Err(_) => Err(D::Error::custom("an allele is a number or a string")),
        }
    }
}

/// A declared sub-space: a base genome and, for some genes, the alleles allowed.
///
/// ```toml
/// [subspace.base]
/// qk_math = "wmma"   # ... a complete genome
/// [subspace.genes]
/// block_m = [32, 64, 128]
/// kv_load = ["direct", "cp_async"]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubSpace {
    pub base: Genome,
    pub genes: BTreeMap<String, Vec<AlleleLabel>>,
}

#[derive(Debug, Error, PartialEq)]
pub enum SpaceError {
    #[error("sub-space: `{0}` is not a gene; genes are {genes}", genes = Gene::ALL.map(|g| g.name()).join(", "))]
    UnknownGene(String),
    #[error("sub-space: `{value}` is not an allele of {gene}; expected one of {allowed}")]
    UnknownAllele {
        gene: Gene,
        value: String,
        allowed: String,
    },
    #[error("sub-space: gene {0} lists no allele; list at least one or leave the gene out")]
    EmptyGene(Gene),
    #[error("sub-space: gene {gene} lists `{value}` twice")]
    DuplicateAllele { gene: Gene, value: String },
    #[error(
        "the search space has no valid genome for D = {head_dim} on {target}; widen the sub-space"
    )]
    NoValidGenome { head_dim: HeadDim, target: Target },
    #[error("an exhaustive walk needs a declared sub-space of at most {ENUMERABLE} points; this space has {0}")]
    NotEnumerable(u128),
    #[error("the guided strategy ranks candidates with a cost model, and none was given; train one from the recorded evaluations (`--model-data DIR`)")]
    NoModel,
    #[error(
        "sub-space: family `{family}` is a {} kernel, but the base genome's family `{base}` is \
         a {} one; a search is of one pass: list families of the base's pass only",
        family.pass(),
        base.pass()
    )]
    MixedPasses { base: Family, family: Family },
}

impl SubSpace {
    /// The allowed allele indices per gene, in canonical gene order.
    pub fn allowed(&self) -> Result<[Vec<usize>; GENES], SpaceError> {
        let mut allowed = Gene::ALL.map(|g| vec![self.base.allele_index(g)]);
        for (name, values) in &self.genes {
            let gene =
                Gene::from_name(name).ok_or_else(|| SpaceError::UnknownGene(name.clone()))?;
            let labels = gene.allele_labels();
            if values.is_empty() {
                return Err(SpaceError::EmptyGene(gene));
            }
            let mut indices = Vec::new();
            for v in values {
                let i = labels.iter().position(|l| *l == v.0).ok_or_else(|| {
                    SpaceError::UnknownAllele {
                        gene,
                        value: v.0.clone(),
                        allowed: labels.join(", "),
                    }
                })?;
                if indices.contains(&i) {
                    return Err(SpaceError::DuplicateAllele {
                        gene,
                        value: v.0.clone(),
                    });
                }
                indices.push(i);
            }
            indices.sort_unstable();
            allowed[gene as usize] = indices;
        }
        let base = self.base.family;
        if let Some(&family) = allowed[Gene::Family as usize]
            .iter()
            .map(|&i| &Family::ALL[i])
            .find(|f| f.pass() != base.pass())
        {
            return Err(SpaceError::MixedPasses { base, family });
        }
        Ok(allowed)
    }
}

/// A family no genome of which can run on `target` is not part of its space (the Hopper
/// family off sm_90), so no mutation proposes it only for repair to take it back. A
/// sub-space that names only such a family keeps it, and reports no valid genome.
fn restrict_families(allowed: &mut [Vec<usize>; GENES], target: Target) {
    let family = &mut allowed[Gene::Family as usize];
    let runs = |&i: &usize| {
        let f = Family::ALL[i];
        HeadDim::ALL
            .iter()
            .any(|&d| evo_genome::space::count_valid_in(f, d, target) > 0)
    };
    if family.iter().any(runs) {
        family.retain(runs);
    }
}

/// Where a search may go: allowed alleles per gene, judged for one head dimension
/// on one device.
#[derive(Debug, Clone)]
pub struct SearchSpace {
    allowed: [Vec<usize>; GENES],
    /// The pass of every family the space allows.
    pass: Pass,
    pub head_dim: HeadDim,
    pub target: Target,
    /// The valid points, in lexicographic order, when the space is small enough.
    valid_points: Option<Vec<Genome>>,
}

impl SearchSpace {
    /// Every allele of every forward gene: the forward's full space.
    pub fn full(head_dim: HeadDim, target: Target) -> SearchSpace {
        SearchSpace::full_for_pass(Pass::Forward, head_dim, target)
    }

    /// Every allele of every gene that shapes a family of `pass`, and only that pass's
    /// families; the genes that shape none of them stay at their baseline.
    pub fn full_for_pass(pass: Pass, head_dim: HeadDim, target: Target) -> SearchSpace {
        let base = Genome::baseline();
        let genes = pass.genes();
        let mut allowed = Gene::ALL.map(|g| match g {
            Gene::Family => (0..g.allele_count())
                .filter(|&i| Family::ALL[i].pass() == pass)
                .collect::<Vec<usize>>(),
            g if genes.contains(&g) => (0..g.allele_count()).collect(),
            g => vec![base.allele_index(g)],
        });
        restrict_families(&mut allowed, target);
        SearchSpace {
            allowed,
            pass,
            head_dim,
            target,
            valid_points: None,
        }
    }

    /// A declared sub-space, of its base genome's pass; fails when it names unknown genes
    /// or alleles, a family of another pass, or has no valid point.
    pub fn sub(
        sub: &SubSpace,
        head_dim: HeadDim,
        target: Target,
    ) -> Result<SearchSpace, SpaceError> {
        let mut allowed = sub.allowed()?;
        restrict_families(&mut allowed, target);
        let mut space = SearchSpace {
            allowed,
            pass: sub.base.pass(),
            head_dim,
            target,
            valid_points: None,
        };
        if space.size() <= ENUMERABLE {
            // One point per kernel: genes that do not apply to a family collapse.
            let mut seen = std::collections::HashSet::new();
            let points: Vec<Genome> = space
                .points()
                .filter(|g| space.is_valid(g))
                .map(|g| g.canonical())
                .filter(|g| seen.insert(*g))
                .collect();
            if points.is_empty() {
                return Err(SpaceError::NoValidGenome { head_dim, target });
            }
            space.valid_points = Some(points);
        }
        Ok(space)
    }

    /// The pass of the space's kernels.
    pub fn pass(&self) -> Pass {
        self.pass
    }

    /// The genes that shape a kernel of the space's pass, in canonical order: the genes
    /// an operator draws for (one that shapes none of its kernels draws nothing, so a
    /// forward search makes the draws it made before the backward genes existed).
    pub fn genes(&self) -> Vec<Gene> {
        self.pass.genes()
    }

    /// Allowed allele indices of a gene, ascending.
    pub fn allowed(&self, gene: Gene) -> &[usize] {
        &self.allowed[gene as usize]
    }

    /// Genes with more than one allowed allele.
    pub fn free_genes(&self) -> Vec<Gene> {
        Gene::ALL
            .into_iter()
            .filter(|&g| self.allowed(g).len() > 1)
            .collect()
    }

    /// Every allele that shapes the genome's kernel is allowed (validity aside): its
    /// family and the genes that apply to that family. A gene that does not apply makes
    /// no kernel, so a Hopper genome of a sub-space that fixes the Ampere genes elsewhere
    /// is still inside it.
    pub fn contains(&self, g: &Genome) -> bool {
        Gene::ALL
            .into_iter()
            .filter(|gene| gene.applies(g.family))
            .all(|gene| self.allowed(gene).contains(&g.allele_index(gene)))
    }

    /// The genome passes the validity rules for this space's head dimension and device.
    pub fn is_valid(&self, g: &Genome) -> bool {
        g.is_valid(self.head_dim, self.target)
    }

    /// In the space and valid: a genome a search may propose.
    pub fn admits(&self, g: &Genome) -> bool {
        self.contains(g) && self.is_valid(g)
    }

    /// The allowed families, in allele order.
    fn families(&self) -> impl Iterator<Item = Family> + '_ {
        self.allowed(Gene::Family).iter().map(|&i| Family::ALL[i])
    }

    /// The genes besides the family itself that shape a family's kernels.
    fn family_genes(family: Family) -> impl Iterator<Item = Gene> {
        Gene::ALL
            .into_iter()
            .filter(move |g| *g != Gene::Family && g.applies(family))
    }

    /// Points of one family: the product of the allowed alleles of the genes that
    /// apply to it (the others make no kernel, so they do not multiply the count).
    fn family_size(&self, family: Family) -> u128 {
        Self::family_genes(family)
            .map(|g| self.allowed(g).len() as u128)
            .product()
    }

    /// Distinct kernels in the product of allowed alleles (valid or not): per allowed
    /// family, the product over the genes that apply to it, summed.
    pub fn size(&self) -> u128 {
        self.families().map(|f| self.family_size(f)).sum()
    }

    /// All points, family by family (in allele order), each family's in lexicographic
    /// order (canonical gene order, last gene fastest) over the genes that apply to it.
    /// Every point is canonical: a gene that does not apply stays at its baseline allele.
    pub fn points(&self) -> impl Iterator<Item = Genome> + '_ {
        self.families().flat_map(move |family| {
            let genes: Vec<Gene> = Self::family_genes(family).collect();
            let base = Genome {
                family,
                ..Genome::baseline()
            };
            let total = self.family_size(family).min(u64::MAX as u128) as u64;
            (0..total).map(move |mut n| {
                let mut g = base;
                for &gene in genes.iter().rev() {
                    let allowed = self.allowed(gene);
                    g = g.with_allele(gene, allowed[(n % allowed.len() as u64) as usize]);
                    n /= allowed.len() as u64;
                }
                g
            })
        })
    }

    /// The valid points in lexicographic order, when the space is enumerable.
    pub fn valid_points(&self) -> Option<&[Genome]> {
        self.valid_points.as_deref()
    }

    /// A point drawn uniformly from the product of allowed alleles (a gene of no family
    /// of the pass takes its first allowed allele, without a draw).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Genome {
        let mut indices = Gene::ALL.map(|g| self.allowed(g)[0]);
        for gene in self.genes() {
            let allowed = self.allowed(gene);
            indices[gene as usize] = allowed[rng.random_range(0..allowed.len())];
        }
        Genome::from_allele_indices(indices)
    }

    /// A valid point drawn uniformly: from the list when enumerable, else by rejection.
    pub fn sample_valid<R: Rng + ?Sized>(&self, rng: &mut R) -> Result<Genome, SpaceError> {
        if let Some(points) = &self.valid_points {
            return Ok(points[rng.random_range(0..points.len())]);
        }
        // The full space is about 3% valid; a million tries failing means there is none.
        for _ in 0..1_000_000 {
            let g = self.sample(rng);
            if self.is_valid(&g) && self.contains(&g.canonical()) {
                return Ok(g.canonical());
            }
        }
        Err(SpaceError::NoValidGenome {
            head_dim: self.head_dim,
            target: self.target,
        })
    }
}
