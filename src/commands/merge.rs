//! `evo merge`: join the experiments of an island-model search into one.
//!
//! ```text
//! OUT/
//!   lineage.json        one graph: every island's nodes, tagged by island; an edge
//!                       from one island's node to another's child is a migration
//!   evaluations.jsonl   every island's records, island by island, as written
//!   report.md           the islands, the merged evolution path, gene-change insights
//! ```
//! `evo lineage OUT` and `evo insights OUT` then read it like any experiment. The same
//! inputs give the same files, byte for byte.
//!
//! OUT is checked before anything is read: it may not be, lie inside or contain one of the
//! islands (the merge would write over what it reads), and a folder holding anything
//! but an earlier merge's files is replaced only with `--force`.

use anyhow::{bail, Context};
use evo_gates::outcome::files::{this_process, FolderLock, LOCK_FILE};
use evo_lineage::{merge_islands, render_insights, render_markdown, write_atomic, Lineage};
use evo_mutator::cache::read_json_lines;
use evo_mutator::{CacheRecord, ExperimentConfig, EXPERIMENT_FILE};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The islands' experiment folders (written by `evo evolve --island K`).
    #[arg(required = true)]
    pub experiments: Vec<PathBuf>,
    /// The merged experiment folder to write: new, empty, or an earlier merge's.
    #[arg(long)]
    pub out: PathBuf,
    /// Write into --out even when it holds files `evo merge` did not write (they stay,
    /// but a lineage.json, evaluations.jsonl or report.md there is replaced).
    #[arg(long)]
    pub force: bool,
}

/// What a merge writes; an --out holding only these (and the marker) is an earlier merge.
const MERGE_FILES: [&str; 4] = [
    "lineage.json",
    "evaluations.jsonl",
    "report.md",
    MERGE_MARKER,
];
/// Written last by every merge: the islands it joined. Its presence says that the
/// folder is a merge's to replace.
const MERGE_MARKER: &str = "merge.toml";

/// `path` with `.`, `..` and symbolic links resolved as far as it exists, so that two
/// spellings of one folder compare equal; the part that does not exist yet is appended.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// Refuses an --out that is, lies inside or contains an input, or that holds files
/// another command wrote (unless `force`).
fn check_out(args: &MergeArgs) -> anyhow::Result<()> {
    let out = resolved(&args.out);
    for input in &args.experiments {
        let island = resolved(input);
        let relation = if out == island {
            "is"
        } else if out.starts_with(&island) {
            "lies inside"
        } else if island.starts_with(&out) {
            "contains"
        } else {
            continue;
        };
        bail!(
            "--out {} {relation} the island {}: the merge would write over what it reads; choose a folder apart from every island",
            args.out.display(),
            input.display()
        );
    }
    if !args.out.exists() {
        return Ok(());
    }
    if !args.out.is_dir() {
        bail!("--out {} is a file; choose a folder", args.out.display());
    }
    let mut names: Vec<String> = std::fs::read_dir(&args.out)
        .with_context(|| format!("{}: cannot list", args.out.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != LOCK_FILE)
        .collect();
    names.sort();
    let a_merge = names.iter().any(|n| n == MERGE_MARKER)
        && names.iter().all(|n| MERGE_FILES.contains(&n.as_str()));
    if names.is_empty() || a_merge || args.force {
        return Ok(());
    }
    bail!(
        "--out {} holds {} and was not written by `evo merge`; choose a new folder, or pass --force to write the merge into it",
        args.out.display(),
        names.join(", ")
    )
}

/// One island's experiment, read.
struct IslandRun {
    dir: PathBuf,
    island: u32,
    islands: u32,
    lineage: Lineage,
    /// The whole records of its evaluations.jsonl, as written.
    records: String,
    record_count: usize,
}

fn load(dir: &Path) -> anyhow::Result<IslandRun> {
    let config_path = dir.join(EXPERIMENT_FILE);
    let config = ExperimentConfig::load(&config_path)?;
    let Some(island) = config.island else {
        bail!(
            "{}: has no [island] section; `evo merge` joins the islands of one search run with `evo evolve --island K --islands N --exchange DIR`",
            config_path.display()
        );
    };
    let lineage = Lineage::load(&dir.join("lineage.json")).with_context(|| {
        format!(
            "{}: island {} has no lineage yet; run (or resume) it with `evo evolve --experiment {}`",
            dir.display(),
            island.island,
            dir.display()
        )
    })?;
    let log_path = dir.join("evaluations.jsonl");
    let text = std::fs::read_to_string(&log_path)
        .with_context(|| format!("{}: cannot read", log_path.display()))?;
    // A cut-short last line (a killed run not yet resumed) is left out, as a resume would.
    let lines = read_json_lines::<CacheRecord>(&text, &log_path)?;
    if let Some(w) = &lines.warning {
        eprintln!("warning: {w}");
    }
    let mut records = text[..lines.complete_len].to_string();
    if !records.is_empty() && !records.ends_with('\n') {
        records.push('\n');
    }
    Ok(IslandRun {
        dir: dir.to_path_buf(),
        island: island.island,
        islands: island.islands,
        lineage,
        records,
        record_count: lines.values.len(),
    })
}

pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    check_out(&args)?;
    let mut runs = args
        .experiments
        .iter()
        .map(|dir| load(dir))
        .collect::<anyhow::Result<Vec<_>>>()?;
    runs.sort_by_key(|r| r.island);
    if let Some(pair) = runs.windows(2).find(|w| w[0].island == w[1].island) {
        bail!(
            "{} and {} are both island {}; give each island once",
            pair[0].dir.display(),
            pair[1].dir.display(),
            pair[0].island
        );
    }
    let islands = runs[0].islands;
    if let Some(other) = runs.iter().find(|r| r.islands != islands) {
        bail!(
            "{} is island {} of {}, but {} is of {islands}; merge the islands of one search",
            other.dir.display(),
            other.island,
            other.islands,
            runs[0].dir.display()
        );
    }
    let missing: Vec<String> = (0..islands)
        .filter(|k| runs.iter().all(|r| r.island != *k))
        .map(|k| k.to_string())
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "note: island(s) {} of {islands} not given; the merge holds the others",
            missing.join(", ")
        );
    }
    let title = args
        .out
        .file_name()
        .map_or("merged".into(), |n| n.to_string_lossy().into_owned());
    let pairs: Vec<(u32, Lineage)> = runs.iter().map(|r| (r.island, r.lineage.clone())).collect();
    let (merged, summary) = merge_islands(&title, &pairs)?;

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let _lock = FolderLock::acquire(&args.out, &this_process())?;
    let lineage_path = args.out.join("lineage.json");
    merged.save(&lineage_path)?;
    let records: String = runs.iter().map(|r| r.records.as_str()).collect();
    let log_path = args.out.join("evaluations.jsonl");
    write_atomic(&log_path, records.as_bytes())
        .with_context(|| format!("{}: cannot write", log_path.display()))?;

    let mut report = format!("# Experiment {title}: {} islands merged\n\n", runs.len());
    report.push_str(
        "| island | experiment | evaluations | immigrants | best µs |\n|---:|---|---:|---:|---:|\n",
    );
    for r in &runs {
        let immigrants = r.lineage.nodes().filter(|n| n.is_immigrant()).count();
        let best = r
            .lineage
            .nodes()
            .filter(|n| !n.is_immigrant())
            .filter_map(|n| n.score_us())
            .min_by(f64::total_cmp)
            .map_or("—".into(), |us| format!("{us:.2}"));
        let _ = writeln!(
            report,
            "| {} | `{}` | {} | {immigrants} | {best} |",
            r.island,
            r.dir.display(),
            r.record_count
        );
    }
    let _ = writeln!(
        report,
        "\n{} nodes, {} migration edges; {} immigrant nodes joined to the node that measured them; {} genomes measured by more than one island (kept once).\n",
        summary.nodes, summary.migration_edges, summary.immigrants, summary.duplicates
    );
    report.push_str(&render_markdown(&merged));
    report.push('\n');
    report.push_str(&render_insights(&evo_lineage::insights(
        std::slice::from_ref(&merged),
    )));
    let report_path = args.out.join("report.md");
    write_atomic(&report_path, report.as_bytes())
        .with_context(|| format!("{}: cannot write", report_path.display()))?;
    let marker = args.out.join(MERGE_MARKER);
    let inputs = runs
        .iter()
        .map(|r| format!("  {:?},\n", r.dir.display().to_string()))
        .collect::<String>();
    write_atomic(
        &marker,
        format!("# written by `evo merge`: the islands it joined\nislands = [\n{inputs}]\n")
            .as_bytes(),
    )
    .with_context(|| format!("{}: cannot write", marker.display()))?;

    println!(
        "merged {} islands: {} nodes, {} migration edges, {} evaluation records",
        runs.len(),
        summary.nodes,
        summary.migration_edges,
        runs.iter().map(|r| r.record_count).sum::<usize>()
    );
    match merged.champion() {
        Some(c) => println!(
            "champion: {} {} at {:.2} µs (island {})\n  {}",
            c.label(),
            c.id,
            c.score_us().unwrap_or_default(),
            c.island.map_or("?".into(), |k| k.to_string()),
            c.genome.summary()
        ),
        None => println!("no candidate passed GREEN"),
    }
    println!("report: {}", report_path.display());
    Ok(())
}
