//! The training set: every evaluation recorded under a folder (an experiments tree),
//! one row per (shape, genome), its time relative to the fastest recorded on that
//! shape.
//!
//! Only what a model may honestly learn from is taken: evaluations that passed the
//! gates on one shape (a suite's geometric mean belongs to no shape), on the device the
//! search runs on, of the search's pass; and never a record of a shape the model is
//! judged on (`leave_out`), wherever it was recorded. A genome measured more than once
//! on a shape (resumed searches, landscapes measured again) counts once, at its median.

use evo_genome::{Genome, Pass, Problem};
use evo_mutator::RecordLine;
use evo_record::Evaluation;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RecordsError {
    #[error("{path}: cannot read the recorded evaluations: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{dir}: no evaluation recorded{} for the {pass} pass outside the left-out shapes; point --model-data at a folder of `evo evolve` or `evo landscape` records", device.as_ref().map_or(String::new(), |d| format!(" on `{d}`")))]
    Empty {
        dir: PathBuf,
        device: Option<String>,
        pass: Pass,
    },
}

/// How a training snapshot's name ends.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot.jsonl.gz";

/// One training row.
#[derive(Debug, Clone)]
pub struct Row {
    pub problem: Problem,
    pub genome: Genome,
    /// The device it was measured on, and its median µs there.
    pub device: String,
    pub us: f64,
    /// ln(µs) minus ln(the fastest µs recorded on this shape): 0 for the best.
    pub log_ratio: f64,
}

/// What to take.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The device name as the driver reports it; none: every device's records.
    pub device: Option<String>,
    pub pass: Pass,
    /// Shapes never to learn from: the ones the model will be judged on.
    pub leave_out: Vec<Problem>,
}

/// The rows and where they came from.
#[derive(Debug, Clone)]
pub struct TrainingSet {
    pub rows: Vec<Row>,
    /// Distinct shapes among the rows.
    pub shapes: usize,
    /// Record files read.
    pub files: usize,
    /// Evaluations that passed on this device and pass but were of a left-out shape.
    pub left_out: usize,
}

impl TrainingSet {
    /// Reads every `*.jsonl` and `*.jsonl.gz` under `dir`, or the one file `dir` names.
    /// Lines that are not evaluations (bench rows, migrants) are not training data and
    /// are passed over. A snapshot (`*.snapshot.jsonl.gz`, written by `evo model`) is
    /// read only when named itself: inside a folder it repeats the records beside it.
    pub fn load(dir: &Path, selection: &Selection) -> Result<TrainingSet, RecordsError> {
        let mut files = Vec::new();
        if dir.is_file() {
            files.push(dir.to_path_buf());
        } else {
            walk(dir, &mut files)?;
        }
        files.sort();
        // Keyed by the shape's label (a problem written with `kv_heads = heads` is the
        // same shape as one without it) and by device too: with no device named, one
        // genome's times on two devices are two rows, each against its own device's
        // fastest. Sorted, so the rows (and the forest grown from them) do not depend on
        // the order a hash map happens to keep.
        let leave_out: HashSet<String> = selection.leave_out.iter().map(Problem::label).collect();
        type Times = (Problem, Genome, Vec<f64>);
        let mut times: BTreeMap<(String, String, String), Times> = BTreeMap::new();
        let mut left_out = 0;
        for path in &files {
            for e in read_file(path)? {
                let Some((problem, us)) = usable(&e, selection) else {
                    continue;
                };
                let label = problem.label();
                if leave_out.contains(&label) {
                    left_out += 1;
                    continue;
                }
                times
                    .entry((label, e.genome_id.to_string(), e.device.clone()))
                    .or_insert_with(|| (problem, e.genome, Vec::new()))
                    .2
                    .push(us);
            }
        }
        let medians: Vec<Row> = times
            .into_iter()
            .map(|((_, _, device), (problem, genome, mut t))| {
                t.sort_by(f64::total_cmp);
                Row {
                    problem,
                    genome,
                    device,
                    us: t[t.len() / 2],
                    log_ratio: 0.0,
                }
            })
            .collect();
        let mut best: HashMap<(String, String), f64> = HashMap::new();
        for r in &medians {
            let b = best
                .entry((r.problem.label(), r.device.clone()))
                .or_insert(f64::INFINITY);
            *b = b.min(r.us);
        }
        let shapes = best.keys().map(|(p, _)| p).collect::<HashSet<_>>().len();
        if medians.is_empty() {
            return Err(RecordsError::Empty {
                dir: dir.to_path_buf(),
                device: selection.device.clone(),
                pass: selection.pass,
            });
        }
        let rows = medians
            .into_iter()
            .map(|mut r| {
                r.log_ratio = (r.us / best[&(r.problem.label(), r.device.clone())]).ln();
                r
            })
            .collect();
        Ok(TrainingSet {
            rows,
            shapes,
            files: files.len(),
            left_out,
        })
    }
}

impl Row {
    /// The row as a bare evaluation line, as a record file holds one: what a training
    /// snapshot is made of.
    pub fn to_evaluation(&self) -> Evaluation {
        Evaluation::summarized(
            self.genome,
            &self.device,
            self.problem,
            self.us,
            "median of the records",
        )
    }
}

/// The shape and time of an evaluation the selection may learn from.
fn usable(e: &Evaluation, selection: &Selection) -> Option<(Problem, f64)> {
    let us = e
        .score_us
        .filter(|us| e.is_ok() && us.is_finite() && *us > 0.0)?;
    let [timing] = e.timings.as_slice() else {
        return None;
    };
    (selection.device.as_ref().is_none_or(|d| *d == e.device)
        && e.genome.family.pass() == selection.pass)
        .then_some((timing.problem, us))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RecordsError> {
    let read_err = |error| RecordsError::Read {
        path: dir.to_path_buf(),
        error,
    };
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else {
            let name = path
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned());
            // A gzipped file beside its plain twin holds the same records.
            let twin = name.ends_with(".jsonl.gz") && path.with_extension("").is_file();
            if (name.ends_with(".jsonl") || name.ends_with(".jsonl.gz"))
                && !name.ends_with(SNAPSHOT_SUFFIX)
                && !twin
            {
                out.push(path);
            }
        }
    }
    Ok(())
}

/// The evaluations of one record file, gunzipped when its name ends in `.gz`.
fn read_file(path: &Path) -> Result<Vec<Evaluation>, RecordsError> {
    // `x.jsonl.gz` is read as the gzipped `x.jsonl` (which `walk` knows is absent).
    let plain = if path.extension().is_some_and(|x| x == "gz") {
        path.with_extension("")
    } else {
        path.to_path_buf()
    };
    let read_err = |path: PathBuf, error| RecordsError::Read { path, error };
    let (_, text) = evo_record::gz::read_plain_or_gz(&plain)
        .map_err(|(path, error)| read_err(path, error))?
        .ok_or_else(|| {
            let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
            read_err(path.to_path_buf(), missing)
        })?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<RecordLine>(line).ok())
        .map(RecordLine::into_evaluation)
        .collect())
}
