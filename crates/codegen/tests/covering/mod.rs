//! A covering design for the compile sweep: few compiles that still reach every allele
//! of every gene on every target and head dimension where the rules allow it.
//!
//! A uniform random sample reaches rare alleles only by luck (the sweep's former 300
//! genomes, 480 compiles, left 56 alleles of some target and head dimension out), while
//! the code paths the template chooses between are picked by the alleles. So the sweep is built per cell (family, target, head
//! dim): every valid structural genome of the cell is enumerated, and genomes are
//! picked greedily until every allele that some valid genome has is present, and every
//! pair of alleles of the *path* genes (the categorical switches, which select code
//! rather than size it) that some valid genome has. The genes no rule reads (the
//! free genes, and the dtype) cannot make a genome invalid, so they are dealt round
//! robin over the picks. [`missing`] is the property itself, checked by a CPU test so
//! that a future cut of the sweep cannot drop coverage silently.

use evo_genome::{space, Dtype, Family, Gene, Genome, HeadDim, Pass, Target, GENES};

/// One compile: the genome, its head dimension, dtype and target.
pub type Job = (Genome, HeadDim, Dtype, Target);

/// Structural genes that select a code path, not a size: their pairs are covered too.
/// The split count is left out: its six alleles would make every Hopper cell's pairs
/// (6 x 4 with producer_regs) cost more compiles than its sixteen block_n alleles do,
/// and its one path switch (one split or several) is paired through the cluster merge.
const PATH_GENES: [Gene; 15] = [
    Gene::QkMath,
    Gene::PvMath,
    Gene::PPath,
    Gene::OAccum,
    Gene::SmemLayout,
    Gene::WgSplit,
    Gene::OStore,
    Gene::ClusterCombine,
    Gene::Persistent,
    Gene::SoftmaxOverlap,
    Gene::ConsumerWgs,
    Gene::Pingpong,
    Gene::ProducerRegs,
    Gene::DqMode,
    Gene::DkvSplit,
];

/// Candidates scored per greedy pick: the cell's valid genomes evenly strided. Scoring
/// every valid genome (hundreds of thousands in some cells) at every pick costs seconds
/// in a debug build and buys a pick or two; what the pool misses is completed below.
const POOL: usize = 2048;

/// One allele of one gene, by index.
type Allele = (Gene, usize);

/// Alleles per gene, at most (block_n's 16): the goal table's stride.
const ALLELES: usize = 16;
/// Slots for one allele of one gene, plus "no second allele".
const SLOTS: usize = GENES * ALLELES + 1;

/// What a cell's sweep must reach, as a dense table: an allele alone, or a pair of
/// path alleles. A table and not a set: a cell has up to ~660k structural genomes to
/// walk, and a set's allocation per genome costs seconds in a debug build.
#[derive(Clone)]
struct Goals(Vec<bool>);

/// `Gene::ALL` is in declaration order, so a gene's discriminant is its index.
fn slot(gene: Gene, allele: usize) -> usize {
    gene as usize * ALLELES + allele
}

fn unslot(s: usize) -> Allele {
    (Gene::ALL[s / ALLELES], s % ALLELES)
}

impl Goals {
    fn new() -> Goals {
        Goals(vec![false; SLOTS * SLOTS])
    }

    fn set(&mut self, a: usize, b: Option<usize>, to: bool) {
        self.0[a * SLOTS + b.unwrap_or(SLOTS - 1)] = to;
    }

    fn get(&self, a: usize, b: Option<usize>) -> bool {
        self.0[a * SLOTS + b.unwrap_or(SLOTS - 1)]
    }

    fn is_empty(&self) -> bool {
        !self.0.contains(&true)
    }

    /// The goals still set, as (gene, allele) and the pair's other, if any.
    fn list(&self) -> Vec<(Allele, Option<Allele>)> {
        (0..self.0.len())
            .filter(|&i| self.0[i])
            .map(|i| {
                let (a, b) = (i / SLOTS, i % SLOTS);
                (unslot(a), (b != SLOTS - 1).then(|| unslot(b)))
            })
            .collect()
    }
}

/// A family's gene slots, precomputed: structural genes, path genes.
struct Layout {
    structural: Vec<Gene>,
    path: Vec<Gene>,
}

impl Layout {
    fn of(family: Family) -> Layout {
        let applies = |g: &Gene| g.applies(family) && *g != Gene::Family;
        Layout {
            structural: space::structural_in(family),
            path: PATH_GENES.into_iter().filter(applies).collect(),
        }
    }

    /// Calls `f` with each goal `g` reaches: its structural alleles and path pairs.
    fn each_goal(&self, g: &Genome, mut f: impl FnMut(usize, Option<usize>)) {
        let mut path = [0usize; PATH_GENES.len()];
        for (i, gene) in self.path.iter().enumerate() {
            path[i] = slot(*gene, g.allele_index(*gene));
        }
        let path = &path[..self.path.len()];
        for gene in &self.structural {
            f(slot(*gene, g.allele_index(*gene)), None);
        }
        for (i, a) in path.iter().enumerate() {
            for b in &path[i + 1..] {
                f(*a, Some(*b));
            }
        }
    }
}

/// The targets a family compiles for: the Hopper templates need sm_90a.
pub fn targets_of(family: Family) -> &'static [Target] {
    match family {
        Family::Ampere | Family::AmpereBwd => &Target::ALL,
        Family::Hopper | Family::HopperBwd => &[Target::Sm90],
    }
}

/// Every valid canonical genome of the cell over the structural genes (the free genes
/// at their baseline).
pub fn valid_structural(family: Family, d: HeadDim, target: Target) -> Vec<Genome> {
    let structural = space::structural_in(family);
    let base = Genome {
        family,
        ..Genome::baseline()
    };
    space::product(base, &structural)
        .filter(|g| g.is_valid(d, target))
        .collect()
}

/// What a cell's sweep must reach, given its valid structural genomes: each allele of
/// a structural gene some valid genome has, each allele of every free gene (when the
/// cell has any valid genome), and each pair of path alleles some valid genome has.
fn goals(family: Family, valid: &[Genome]) -> Goals {
    let mut goals = Goals::new();
    if valid.is_empty() {
        return goals;
    }
    for gene in free_genes(family) {
        for a in 0..gene.allele_count() {
            goals.set(slot(gene, a), None, true);
        }
    }
    let layout = Layout::of(family);
    for g in valid {
        layout.each_goal(g, |a, b| goals.set(a, b, true));
    }
    goals
}

/// The genes of a family no rule reads (`exp` is read for `hopper_bwd` alone).
fn free_genes(family: Family) -> Vec<Gene> {
    space::free_genes_in(family)
}

/// The covering picks of one cell, free genes and dtype dealt round robin.
fn cell_jobs(cell: &Cell) -> Vec<Job> {
    let (family, d, target, valid) = (cell.family, cell.head_dim, cell.target, &cell.valid);
    let layout = Layout::of(family);
    let free = free_genes(family);
    let mut open = cell.goals.clone();
    // The free genes are dealt below, not picked for.
    for gene in &free {
        for a in 0..gene.allele_count() {
            open.set(slot(*gene, a), None, false);
        }
    }
    let mut picks: Vec<Genome> = Vec::new();
    let step = valid.len().div_ceil(POOL).max(1);
    while !open.is_empty() {
        let gain = |g: &Genome| {
            let mut n = 0;
            layout.each_goal(g, |a, b| n += usize::from(open.get(a, b)));
            n
        };
        // Shift the stride's phase every pick so the pool is not the same genomes.
        let phase = picks.len() % step;
        let best = valid
            .iter()
            .skip(phase)
            .step_by(step)
            .max_by_key(|g| gain(g))
            .filter(|g| gain(g) > 0)
            // The pool reaches nothing still open: the first genome that does.
            .or_else(|| valid.iter().find(|g| gain(g) > 0))
            .copied()
            .expect("every open goal comes from some valid genome");
        layout.each_goal(&best, |a, b| open.set(a, b, false));
        picks.push(best);
    }
    // Enough jobs for every free allele and both dtypes.
    let needed = free
        .iter()
        .map(|g| g.allele_count())
        .chain([Dtype::ALL.len()])
        .max()
        .unwrap_or(0);
    let mut jobs = Vec::new();
    if picks.is_empty() {
        return jobs;
    }
    for i in 0..picks.len().max(needed) {
        let mut g = picks[i % picks.len()];
        for (k, gene) in free.iter().enumerate() {
            // Offset per gene, so two free genes do not move in lockstep.
            g = g.with_allele(*gene, (i + k) % gene.allele_count());
        }
        jobs.push((g, d, Dtype::ALL[i % Dtype::ALL.len()], target));
    }
    jobs
}

/// One cell of the sweep and its valid structural genomes.
pub struct Cell {
    pub family: Family,
    pub head_dim: HeadDim,
    pub target: Target,
    valid: Vec<Genome>,
    /// What the cell's jobs must reach (see [`goals`]).
    goals: Goals,
}

/// Every forward cell: each forward family, the targets it compiles for, every head
/// dimension.
pub fn cells() -> Vec<Cell> {
    cells_for_pass(Pass::Forward)
}

/// Every cell of one pass's families.
pub fn cells_for_pass(pass: Pass) -> Vec<Cell> {
    for (i, gene) in Gene::ALL.into_iter().enumerate() {
        assert_eq!(gene as usize, i, "Gene::ALL out of declaration order");
        assert!(
            gene.allele_count() <= ALLELES,
            "{gene} has more than {ALLELES} alleles: raise ALLELES"
        );
    }
    let mut cells = Vec::new();
    for family in pass.families() {
        for &target in targets_of(family) {
            for head_dim in HeadDim::ALL {
                let valid = valid_structural(family, head_dim, target);
                cells.push(Cell {
                    family,
                    head_dim,
                    target,
                    goals: goals(family, &valid),
                    valid,
                });
            }
        }
    }
    cells
}

/// The whole covering sweep, cell after cell.
pub fn jobs(cells: &[Cell]) -> Vec<Job> {
    cells.iter().flat_map(cell_jobs).collect()
}

/// What `jobs` fails to reach, one line per cell and goal (empty: the property holds).
/// Also reports a cell with valid genomes that has a dtype no job compiles, and a job
/// that is not valid where it is compiled.
pub fn missing(cells: &[Cell], jobs: &[Job]) -> Vec<String> {
    let mut out = Vec::new();
    for (g, d, dtype, target) in jobs {
        if !g.is_valid(*d, *target) {
            out.push(format!("{} D{d} {dtype} {target}: not valid", g.summary()));
        }
    }
    for cell in cells {
        let (family, d, target) = (cell.family, cell.head_dim, cell.target);
        let here: Vec<&Job> = jobs
            .iter()
            .filter(|(g, jd, _, t)| g.family == family && *jd == d && *t == target)
            .collect();
        let layout = Layout::of(family);
        let mut open = cell.goals.clone();
        for (g, ..) in &here {
            for gene in free_genes(family) {
                open.set(slot(gene, g.allele_index(gene)), None, false);
            }
            layout.each_goal(g, |a, b| open.set(a, b, false));
        }
        let name = format!("{family} D{d} {target}");
        let label = |(gene, a): Allele| format!("{gene} = {}", gene.allele_labels()[a]);
        for (a, pair) in open.list() {
            match pair {
                None => out.push(format!("{name}: no job with {}", label(a))),
                Some(b) => out.push(format!("{name}: no job with {} and {}", label(a), label(b))),
            }
        }
        if !cell.valid.is_empty() {
            for dtype in Dtype::ALL {
                if !here.iter().any(|(_, _, t, _)| *t == dtype) {
                    out.push(format!("{name}: no {dtype} job"));
                }
            }
        }
    }
    out
}

/// The property, on the CPU (no NVRTC): a cut that drops an allele, a pair of path
/// switches or a dtype from some target and head dimension fails here.
#[test]
fn covering_sweep_reaches_every_allele_on_every_target() {
    let cells = cells();
    let jobs = jobs(&cells);
    let per_cell: Vec<String> = cells
        .iter()
        .map(|c| {
            let n = jobs
                .iter()
                .filter(|(g, d, _, t)| g.family == c.family && *d == c.head_dim && *t == c.target)
                .count();
            format!("{} {} D{} {n}", c.family, c.target, c.head_dim)
        })
        .collect();
    eprintln!("[covering] {} jobs: {}", jobs.len(), per_cell.join(", "));
    let missing = missing(&cells, &jobs);
    assert!(
        missing.is_empty(),
        "{} goals not reached by the {} covering jobs:\n{}",
        missing.len(),
        jobs.len(),
        missing.join("\n")
    );
    // Every job a distinct kernel: a duplicate is a compile wasted.
    let distinct: std::collections::HashSet<&Job> = jobs.iter().collect();
    assert_eq!(distinct.len(), jobs.len(), "duplicate covering jobs");
}
