//! `evo champions`: per-shape champions as data, from the searches that found them;
//! `evo dispatch`: which champion a shape gets, and why.
//!
//! ```text
//! genomes/champions/<device>/
//!   dispatch.toml          device, and one [[class]] per shape: shape, champion file,
//!                          experiment, and the figures of the bench that measured it
//!   <class>.toml           the champion genome, with a header: shape, experiment, µs
//!                          against the fastest baseline of the same run
//! ```
//! `evo bench --champions DIR --record` fills in (and refreshes) the figures.

use anyhow::{bail, Context};
use evo_gates::outcome::files::{this_process, FolderLock};
use evo_genome::dispatch::{DispatchTable, ShapeClass, DISPATCH_FILE};
use evo_genome::{GenomeFile, Problem};
use evo_lineage::{write_atomic, Lineage};
use evo_mutator::{ExperimentConfig, EXPERIMENT_FILE};
use std::path::{Path, PathBuf};

/// The champions folder of a device: `genomes/champions/h100` for an H100.
pub const DEFAULT_CHAMPIONS: &str = "genomes/champions/h100";

#[derive(Debug, clap::Args)]
pub struct ChampionsArgs {
    /// Experiment folders of `evo evolve --problem ...` searches (one shape each).
    #[arg(required = true)]
    pub experiments: Vec<PathBuf>,
    /// The champions folder to write (classes already there and not searched again
    /// are kept).
    #[arg(long, default_value = DEFAULT_CHAMPIONS)]
    pub out: PathBuf,
    /// Take each search's champion even where the recorded one is faster, or was not
    /// timed by the same search (by default the faster is kept, and a recorded champion
    /// that cannot be compared stays).
    #[arg(long)]
    pub replace: bool,
    /// Write over files in --out that its dispatch.toml does not name (a file of a
    /// champion's name that evo did not write).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// The shape, `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]`, e.g. `2,8,2048,2048,128,bf16,causal`.
    pub shape: String,
    /// The champions folder whose dispatch.toml to read.
    #[arg(long, default_value = DEFAULT_CHAMPIONS)]
    pub champions: PathBuf,
}

/// One search's champion.
struct Found {
    problem: Problem,
    genome: evo_genome::Genome,
    us: f64,
    device: String,
    experiment: PathBuf,
    seed_of: Option<String>,
    lineage: Lineage,
}

impl Found {
    /// This search's time of `id`, when it measured that genome.
    fn time_of(&self, id: &str) -> Option<f64> {
        self.lineage
            .nodes()
            .find(|n| n.id.to_string() == id)
            .and_then(|n| n.score_us())
    }
}

fn found(dir: &Path) -> anyhow::Result<Found> {
    let config = ExperimentConfig::load(&dir.join(EXPERIMENT_FILE))?;
    // No [problem]: `evo evolve`'s default objective, the seed shape.
    let problem = config.problem.unwrap_or_else(Problem::seed);
    if !config.suite.is_empty() {
        bail!(
            "{}: a suite search has no one shape; per-shape champions come from `evo evolve --problem SPEC`",
            dir.join(EXPERIMENT_FILE).display()
        );
    }
    let lineage = Lineage::load(&dir.join("lineage.json")).with_context(|| {
        format!(
            "{} is not an experiment folder written by `evo evolve`",
            dir.display()
        )
    })?;
    let champion = lineage
        .champion()
        .with_context(|| format!("{}: no candidate passed the gates", dir.display()))?;
    let us = champion
        .score_us()
        .with_context(|| format!("{}: its champion has no time", dir.display()))?;
    Ok(Found {
        problem,
        genome: champion.genome,
        us,
        device: lineage.meta.device.clone(),
        experiment: dir.components().collect(),
        seed_of: lineage
            .champion_path()
            .first()
            .and_then(|root| root.name.clone()),
        lineage,
    })
}

/// Writes every champion file of `table` in `dir` with its header, each through a
/// temporary file and a rename (a reader sees the old champion or the new one).
pub fn write_champions(
    dir: &Path,
    table: &DispatchTable,
    genomes: &[(String, evo_genome::Genome)],
) -> anyhow::Result<()> {
    for class in &table.classes {
        let Some((_, genome)) = genomes.iter().find(|(n, _)| *n == class.name) else {
            continue;
        };
        let file = GenomeFile {
            name: format!("champion-{}", class.name),
            description: String::new(),
            genes: *genome,
        };
        let mut text = String::new();
        for line in class.champion_header(&table.device).lines() {
            text += &format!("# {line}\n");
        }
        text += &file.to_toml_string();
        let path = dir.join(&class.champion);
        write_atomic(&path, text.as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(())
}

/// Writes the table through a temporary file and a rename.
pub fn write_table(path: &Path, table: &DispatchTable) -> anyhow::Result<()> {
    write_atomic(path, table.to_toml_string(TABLE_HEADER).as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// Locks a champions folder for a writer (`evo champions`, `evo bench --record`): two
/// writers would each rewrite the table from what they read, and one's classes be lost.
pub fn lock_champions(dir: &Path) -> anyhow::Result<FolderLock> {
    FolderLock::acquire(dir, &this_process()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Reads a champions folder's table and its champion files, each checked (the class's
/// own file, inside the folder, the genome its figures belong to). A missing table is
/// told apart from a damaged one, whose error names the line and the field.
pub fn load_table(dir: &Path) -> anyhow::Result<(DispatchTable, Vec<GenomeFile>)> {
    let path = dir.join(DISPATCH_FILE);
    if !path.exists() {
        bail!(
            "no dispatch table at {} (make one with `evo champions EXPERIMENT... --out {}`)",
            path.display(),
            dir.display()
        );
    }
    let table = DispatchTable::load(&path)?;
    let files = table.load_champions(dir, &path)?;
    Ok((table, files))
}

/// What to do with a class that the table already has a champion for.
enum Verdict {
    Take(String),
    Keep(String),
}

/// The faster of the recorded champion and a search's, timed by the same search (the
/// new one's, or the recorded one's experiment); without a common measurement the
/// recorded one stays (`--replace` skips this judgement).
fn judge(recorded: &ShapeClass, recorded_id: &str, f: &Found) -> Verdict {
    let new_id = f.genome.id().to_string();
    if recorded_id == new_id {
        return Verdict::Keep(format!(
            "the recorded champion is this genome, kept with its figures ({})",
            recorded.experiment
        ));
    }
    // Both timed by the new search, or both by the recorded champion's search.
    let common = f
        .time_of(recorded_id)
        .map(|old| (old, f.us, f.experiment.display().to_string()))
        .or_else(|| {
            let lineage =
                Lineage::load(&Path::new(&recorded.experiment).join("lineage.json")).ok()?;
            let time = |id: &str| {
                lineage
                    .nodes()
                    .find(|n| n.id.to_string() == id)
                    .and_then(|n| n.score_us())
            };
            Some((
                time(recorded_id)?,
                time(&new_id)?,
                recorded.experiment.clone(),
            ))
        });
    match common {
        Some((old, new, by)) if new < old => Verdict::Take(format!(
            "{new:.2} µs against the recorded {recorded_id}'s {old:.2} µs, both timed by {by}"
        )),
        Some((old, new, by)) => Verdict::Keep(format!(
            "kept the recorded {recorded_id}: {old:.2} µs against {new_id}'s {new:.2} µs, both timed by {by}; --replace takes the new one"
        )),
        None => Verdict::Keep(format!(
            "kept the recorded {recorded_id} ({}{}): no search timed both, so they cannot be compared; \
             bench both, or pass --replace to take {new_id} ({:.2} µs in {})",
            recorded.experiment,
            recorded
                .median_us
                .map(|us| format!(", {us:.2} µs in {}", recorded.bench.as_deref().unwrap_or("a bench")))
                .unwrap_or_default(),
            f.us,
            f.experiment.display()
        )),
    }
}

pub fn run(args: ChampionsArgs) -> anyhow::Result<()> {
    let mut found: Vec<Found> = args
        .experiments
        .iter()
        .map(|d| found(d))
        .collect::<anyhow::Result<_>>()?;
    let device = found[0].device.clone();
    if let Some(other) = found.iter().find(|f| f.device != device) {
        bail!(
            "{} was searched on {}, {} on {device}: one champions folder holds one GPU model's",
            other.experiment.display(),
            other.device,
            found[0].experiment.display()
        );
    }
    if args.out.exists() && !args.out.is_dir() {
        bail!(
            "--out {}: a file, not a champions folder; name a folder",
            args.out.display()
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let _lock = lock_champions(&args.out)?;
    let path = args.out.join(DISPATCH_FILE);
    let (mut table, recorded) = if path.exists() {
        let t = DispatchTable::load(&path)?;
        if t.device != device {
            bail!(
                "{}: its champions are {}'s, these searches ran on {device}; use another --out",
                path.display(),
                t.device
            );
        }
        // With --replace the recorded champions are not compared, so a damaged one does
        // not stand in the way of its replacement.
        let files = if args.replace {
            Vec::new()
        } else {
            t.load_champions(&args.out, &path)?
        };
        (t, files)
    } else {
        let t = DispatchTable {
            device: device.clone(),
            classes: Vec::new(),
            backward: Vec::new(),
        };
        (t, Vec::new())
    };
    // The fastest of the searches of one class is its candidate.
    found.sort_by(|a, b| a.us.total_cmp(&b.us));
    let mut seen: Vec<String> = Vec::new();
    let mut genomes: Vec<(String, evo_genome::Genome)> = Vec::new();
    for f in &found {
        let name = ShapeClass::name_of(&f.problem);
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let at = table.classes.iter().position(|c| c.name == name);
        let verdict = match (at, recorded.is_empty()) {
            (Some(i), false) => judge(&table.classes[i], &recorded[i].genes.id().to_string(), f),
            (Some(_), true) => Verdict::Take("replaces the recorded champion (--replace)".into()),
            (None, _) => Verdict::Take("a new class".into()),
        };
        let why = match verdict {
            Verdict::Keep(why) => {
                println!("{name}: {why}");
                continue;
            }
            Verdict::Take(why) => why,
        };
        let champion = match at {
            Some(i) => table.classes[i].champion.clone(),
            None => format!("{name}.toml"),
        };
        let file = args.out.join(&champion);
        let named = table.classes.iter().any(|c| c.champion == champion);
        if file.exists() && !named && !args.force {
            bail!(
                "{}: exists, and {} does not name it as a champion (evo did not write it); \
                 move it away or pass --force to write {name}'s champion over it",
                file.display(),
                path.display()
            );
        }
        println!(
            "{name}: {} at {:.2} µs in {}{}: {why}",
            f.genome.id(),
            f.us,
            f.experiment.display(),
            f.seed_of
                .as_deref()
                .map(|s| format!(" (descends from {s})"))
                .unwrap_or_default()
        );
        let class = ShapeClass::unbenched(&f.problem, champion, f.experiment.display().to_string());
        match at {
            Some(i) => table.classes[i] = class,
            None => table.classes.push(class),
        }
        genomes.push((name, f.genome));
    }
    if genomes.is_empty() {
        println!(
            "kept every recorded champion; {} is unchanged",
            path.display()
        );
        return Ok(());
    }
    write_champions(&args.out, &table, &genomes)?;
    write_table(&path, &table)?;
    println!(
        "wrote {} champions and {}; time them with `evo bench --champions {} --record`",
        genomes.len(),
        path.display(),
        args.out.display()
    );
    Ok(())
}

/// The comment at the top of every dispatch.toml.
pub const TABLE_HEADER: &str =
    "Per-shape champions and the table that dispatches them (`evo dispatch SPEC`).
Written by `evo champions EXPERIMENT...`; figures by `evo bench --champions DIR --record`:
the champion's and every baseline's ([[class.baseline]]) in the same run; a ratio is
against the fastest baseline, replayed and on a cold L2 each.
Rule for a shape between classes: same head dim; same kind (mask, window, grouped heads)
if any class has it, else the same mask if any has it; then the nearest in work
|log2(B*H*Lq*Lk) - log2(class's)|; ties to the nearest key length, then the nearest group.
The dtype is not a class: each champion is built for f16 and bf16.";

pub fn run_dispatch(args: DispatchArgs) -> anyhow::Result<()> {
    let problem: Problem = args
        .shape
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{e}"))?;
    let (table, files) = load_table(&args.champions)?;
    let path = args.champions.join(DISPATCH_FILE);
    let choice = table.choose(&problem, &path)?;
    let file = args.champions.join(&choice.class.champion);
    let at = table
        .classes
        .iter()
        .position(|c| c.name == choice.class.name)
        .expect("the chosen class is one of the table's");
    let genome = &files[at];
    println!("{problem} -> {} ({})", choice.class.name, file.display());
    println!("  why: {}", choice.reason);
    println!("  genome {}: {}", genome.genes.id(), genome.genes.summary());
    if let Some(us) = choice.class.median_us {
        let bench = choice.class.bench.as_deref().unwrap_or("bench");
        match choice.class.comparison(false) {
            Some(warm) => println!(
                "  on its own shape {}: {warm} ({bench})",
                choice.class_problem
            ),
            None => println!(
                "  on its own shape {}: {us:.2} µs, no baseline in that run ({bench})",
                choice.class_problem
            ),
        }
        if let Some(cold) = choice.class.comparison(true) {
            println!("  cold L2: {cold}");
        }
        if choice.class.genome_id.is_none() {
            println!(
                "  (the table does not say which genome those figures were measured on: \
                 `evo bench --champions {} --record` records it)",
                args.champions.display()
            );
        }
    }
    if choice.considered.len() > 1 {
        println!("  classes considered (distance in doublings of work):");
        for (c, d) in &choice.considered {
            println!("    {:<28} {d:>5.2}", c.name);
        }
    }
    let violations = genome
        .genes
        .violations(problem.head_dim, evo_genome::Target::Sm90);
    if !violations.is_empty() {
        bail!(
            "{}: the champion cannot be built at {problem}: {}",
            file.display(),
            violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}
