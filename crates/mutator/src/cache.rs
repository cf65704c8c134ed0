//! The evaluation cache: an append-only JSON-lines log, one [`CacheRecord`] per
//! evaluation, written and flushed as soon as the evaluation ends.
//!
//! The log is the experiment's memory. A second run of the same experiment reuses
//! every hit; a run killed with `kill -9` loses at most the line being written,
//! which is dropped with a warning on the next open. A record's key names the
//! genome, the objective, the device, the template and the toolchain: timings
//! from another device are refused rather than mixed in, and records from another
//! template, toolchain or objective are kept in the file but not reused.

use evo_genome::GenomeId;
use evo_record::Evaluation;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// What an evaluation's result depends on, besides the genome.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CacheScope {
    /// A problem label (`B1 H8 L512 D64 f16`) or a suite label.
    pub objective: String,
    pub device: String,
    #[serde(default)]
    pub template_hash: String,
    #[serde(default)]
    pub toolchain: String,
}

/// The full key of one record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CacheKey {
    pub genome_id: GenomeId,
    #[serde(flatten)]
    pub scope: CacheScope,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheRecord {
    pub key: CacheKey,
    pub evaluation: Evaluation,
    /// Seconds since the Unix epoch when the evaluation ended.
    #[serde(default)]
    pub recorded_unix: u64,
}

#[derive(Debug, Error)]
pub enum CacheError {
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot open the evaluation cache: {error}")]
    Open {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot append to the evaluation cache: {error}")]
    Append {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}:{line}: not a cache record ({message}); only the last line may be cut short by a crash, so this file was edited or damaged")]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}:{line}: this cache holds timings from `{found}`, but this run measures on `{expected}`; timings of two devices are never mixed: use a new experiment folder")]
    OtherDevice {
        path: PathBuf,
        line: usize,
        found: String,
        expected: String,
    },
}

/// What opening the log found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    /// Records reusable in this scope.
    pub reusable: usize,
    /// Records of another template, toolchain or objective (kept, not reused).
    pub other_scope: usize,
    /// Warnings to show the user (a cut-short last line).
    pub warnings: Vec<String>,
}

/// The open log of one experiment.
#[derive(Debug)]
pub struct EvaluationCache {
    path: PathBuf,
    file: File,
    scope: CacheScope,
    /// Each genome's evaluation and its place among this scope's records.
    entries: HashMap<GenomeId, (usize, Evaluation)>,
    /// Records of this scope in the file, the place of the next one.
    written: usize,
    pub report: LoadReport,
}

/// The parsed lines of a JSON-lines file.
pub struct JsonLines<T> {
    /// Values with their 1-based line numbers.
    pub values: Vec<(usize, T)>,
    /// Byte length of the part made of whole records.
    pub complete_len: usize,
    /// Set when a cut-short last line was skipped.
    pub warning: Option<String>,
}

/// Reads JSON lines, skipping a cut-short last line with a warning; any other
/// line that does not parse is an error naming the line.
pub fn read_json_lines<T: for<'de> Deserialize<'de>>(
    text: &str,
    path: &Path,
) -> Result<JsonLines<T>, CacheError> {
    let mut out = Vec::new();
    let mut offset = 0;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, raw) in lines.iter().enumerate() {
        let line_no = i + 1;
        let complete = raw.ends_with('\n');
        let line = raw.trim_end();
        if line.is_empty() {
            offset += raw.len();
            continue;
        }
        match serde_json::from_str::<T>(line) {
            Ok(v) => {
                out.push((line_no, v));
                offset += raw.len();
            }
            Err(e) if i + 1 == lines.len() && !complete => {
                let warning = format!(
                    "{}:{line_no}: skipped a cut-short last line ({e}); an earlier run was interrupted while writing it",
                    path.display()
                );
                return Ok(JsonLines {
                    values: out,
                    complete_len: offset,
                    warning: Some(warning),
                });
            }
            Err(e) => {
                return Err(CacheError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(JsonLines {
        values: out,
        complete_len: offset,
        warning: None,
    })
}

impl EvaluationCache {
    /// Opens (or creates) the log at `path` for one scope.
    pub fn open(path: &Path, scope: CacheScope) -> Result<EvaluationCache, CacheError> {
        let open_err = |error| CacheError::Open {
            path: path.to_path_buf(),
            error,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(open_err(e)),
        };
        let JsonLines {
            values: records,
            complete_len,
            warning,
        } = read_json_lines::<CacheRecord>(&text, path)?;
        let mut report = LoadReport::default();
        report.warnings.extend(warning);
        let mut entries = HashMap::new();
        for (line, record) in records {
            if record.key.scope.device != scope.device {
                return Err(CacheError::OtherDevice {
                    path: path.to_path_buf(),
                    line,
                    found: record.key.scope.device,
                    expected: scope.device,
                });
            }
            if record.key.scope == scope {
                entries.insert(record.key.genome_id, (report.reusable, record.evaluation));
                report.reusable += 1;
            } else {
                report.other_scope += 1;
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(open_err)?;
        // Drop a cut-short last line so the next record starts on a line of its own;
        // a whole record that only lost its newline gets the newline back.
        if complete_len < text.len() {
            file.set_len(complete_len as u64).map_err(open_err)?;
        }
        if complete_len > 0 && !text[..complete_len].ends_with('\n') {
            (&file).write_all(b"\n").map_err(open_err)?;
        }
        Ok(EvaluationCache {
            path: path.to_path_buf(),
            file,
            scope,
            entries,
            written: report.reusable,
            report,
        })
    }

    /// The recorded evaluation of a genome in this scope.
    pub fn get(&self, id: &GenomeId) -> Option<&Evaluation> {
        self.entries.get(id).map(|(_, e)| e)
    }

    /// Where a genome's record stands in the order the records were written (the order
    /// a steady-state search took its answers in, which a re-run replays): earlier
    /// records have lower places.
    pub fn place(&self, id: &GenomeId) -> Option<usize> {
        self.entries.get(id).map(|(place, _)| *place)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends one record and hands it to the OS before returning, so a crash right
    /// after loses nothing.
    pub fn insert(&mut self, evaluation: Evaluation) -> Result<(), CacheError> {
        let record = CacheRecord {
            key: CacheKey {
                genome_id: evaluation.genome_id.clone(),
                scope: self.scope.clone(),
            },
            evaluation,
            recorded_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let mut line = serde_json::to_string(&record).expect("a record always serializes");
        line.push('\n');
        // One write per record: the line reaches the OS whole or, if killed mid-call, cut
        // short at the end of the file, which `open` then drops.
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|error| CacheError::Append {
                path: self.path.clone(),
                error,
            })?;
        self.entries
            .insert(record.key.genome_id, (self.written, record.evaluation));
        self.written += 1;
        Ok(())
    }
}
