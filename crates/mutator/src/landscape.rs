//! Replay of a recorded landscape: a sub-space measured exhaustively on a GPU,
//! answered by lookup (Kernel Tuner's simulation mode).
//!
//! A landscape folder holds `landscape.toml` ([`LandscapeMeta`]: device, date,
//! problem, template hash, toolchain, target and the declared sub-space) and
//! `evaluations.jsonl` (one evaluation per line, either a bare [`Evaluation`] or a
//! [`CacheRecord`] as `evo landscape` logs them). Replay answers only what was
//! measured: a genome outside the records is an error, never an invented number.

use crate::cache::{read_json_lines, CacheError, CacheRecord, CacheScope};
use crate::evaluator::{Evaluator, EvaluatorError};
use crate::space::{SearchSpace, SpaceError, SubSpace};
use evo_genome::{from_toml, Genome, GenomeId, Problem, Target, TomlError};
use evo_record::Evaluation;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The metadata file of a landscape folder.
pub const META_FILE: &str = "landscape.toml";
/// The measurements of a landscape folder.
pub const EVALUATIONS_FILE: &str = "evaluations.jsonl";
/// The same, gzipped: how a large landscape is kept in a repository. Read when the
/// plain file is absent.
pub const EVALUATIONS_GZ_FILE: &str = "evaluations.jsonl.gz";

/// The text of a landscape folder's measurements and the path it came from:
/// `evaluations.jsonl` when present, else `evaluations.jsonl.gz` decompressed.
/// `Ok(None)` when the folder holds neither.
pub fn read_evaluations(dir: &Path) -> std::io::Result<Option<(PathBuf, String)>> {
    evo_record::gz::read_plain_or_gz(&dir.join(EVALUATIONS_FILE)).map_err(|(_, e)| e)
}

/// `landscape.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandscapeMeta {
    /// Device name as the driver reported it.
    pub device: String,
    /// When it was recorded, e.g. `2026-11-22`.
    pub date: String,
    pub problem: Problem,
    pub template_hash: String,
    pub toolchain: String,
    #[serde(with = "crate::experiment::target_serde")]
    pub target: Target,
    pub subspace: SubSpace,
    /// Free text: how it was measured, caveats.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
}

impl LandscapeMeta {
    /// The cache scope of these measurements.
    pub fn scope(&self) -> CacheScope {
        CacheScope {
            objective: self.problem.label(),
            device: self.device.clone(),
            template_hash: self.template_hash.clone(),
            toolchain: self.toolchain.clone(),
        }
    }
}

#[derive(Debug, Error)]
pub enum LandscapeError {
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot read the recorded landscape: {error}; record one on a GPU with `evo landscape`")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Parse(#[from] TomlError),
    /// The cause is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: {error}")]
    Space { path: PathBuf, error: SpaceError },
    #[error(transparent)]
    Records(#[from] CacheError),
    #[error("{path}:{line}: measured on `{found}`, but landscape.toml says `{expected}`; a landscape holds one device's timings")]
    OtherDevice {
        path: PathBuf,
        line: usize,
        found: String,
        expected: String,
    },
}

/// One line of a record file (`evaluations.jsonl`): as the evaluation cache and
/// `evo landscape` log it, or a bare evaluation.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum RecordLine {
    Record(Box<CacheRecord>),
    Bare(Box<Evaluation>),
}

impl RecordLine {
    pub fn into_evaluation(self) -> Evaluation {
        match self {
            RecordLine::Record(r) => r.evaluation,
            RecordLine::Bare(e) => *e,
        }
    }
}

/// A loaded landscape.
#[derive(Debug, Clone)]
pub struct Landscape {
    pub dir: PathBuf,
    pub meta: LandscapeMeta,
    evaluations: HashMap<GenomeId, Evaluation>,
    space: SearchSpace,
    /// Warnings found while loading (a cut-short last line, unmeasured valid points).
    pub warnings: Vec<String>,
}

impl Landscape {
    /// Reads `landscape.toml` and `evaluations.jsonl` from a folder.
    pub fn load(dir: &Path) -> Result<Landscape, LandscapeError> {
        let meta_path = dir.join(META_FILE);
        let text = std::fs::read_to_string(&meta_path).map_err(|error| LandscapeError::Read {
            path: meta_path.clone(),
            error,
        })?;
        let meta: LandscapeMeta = from_toml(&text, &meta_path)?;
        let space = SearchSpace::sub(&meta.subspace, meta.problem.head_dim, meta.target).map_err(
            |error| LandscapeError::Space {
                path: meta_path.clone(),
                error,
            },
        )?;
        let (eval_path, text) = match read_evaluations(dir) {
            Ok(Some(found)) => found,
            Ok(None) => {
                return Err(LandscapeError::Read {
                    path: dir.join(EVALUATIONS_FILE),
                    error: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("neither it nor {EVALUATIONS_GZ_FILE} exists"),
                    ),
                })
            }
            Err(error) => {
                return Err(LandscapeError::Read {
                    path: dir.join(EVALUATIONS_FILE),
                    error,
                })
            }
        };
        let parsed = read_json_lines::<RecordLine>(&text, &eval_path)?;
        let lines = parsed.values;
        let mut warnings: Vec<String> = parsed.warning.into_iter().collect();
        let mut evaluations = HashMap::new();
        for (line, entry) in lines {
            let evaluation = entry.into_evaluation();
            if evaluation.device != meta.device {
                return Err(LandscapeError::OtherDevice {
                    path: eval_path,
                    line,
                    found: evaluation.device,
                    expected: meta.device,
                });
            }
            evaluations.insert(evaluation.genome_id.clone(), evaluation);
        }
        if let Some(points) = space.valid_points() {
            let missing = points
                .iter()
                .filter(|g| !evaluations.contains_key(&g.id()))
                .count();
            if missing > 0 {
                warnings.push(format!(
                    "{}: {missing} of the {} valid points of the declared sub-space were not measured; a search that reaches one stops with an error",
                    eval_path.display(),
                    points.len()
                ));
            }
        }
        Ok(Landscape {
            dir: dir.to_path_buf(),
            meta,
            evaluations,
            space,
            warnings,
        })
    }

    /// Number of recorded measurements.
    pub fn len(&self) -> usize {
        self.evaluations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.evaluations.is_empty()
    }

    /// The declared sub-space: a search on replay must stay inside it.
    pub fn space(&self) -> &SearchSpace {
        &self.space
    }

    pub fn get(&self, id: &GenomeId) -> Option<&Evaluation> {
        self.evaluations.get(id)
    }

    /// The best recorded score (µs) and its genome.
    pub fn optimum(&self) -> Option<(&Evaluation, f64)> {
        self.evaluations
            .values()
            .filter_map(|e| e.score_us.filter(|_| e.is_ok()).map(|us| (e, us)))
            .min_by(|a, b| {
                a.1.total_cmp(&b.1)
                    .then_with(|| a.0.genome_id.cmp(&b.0.genome_id))
            })
    }

    /// The first line of `evolve` on replay.
    pub fn banner(&self) -> String {
        format!(
            "replaying {} measurements recorded on {} on {} (no CUDA device here)",
            self.len(),
            self.meta.device,
            self.meta.date
        )
    }
}

/// Answers evaluations from a landscape.
#[derive(Debug, Clone)]
pub struct LandscapeEvaluator {
    landscape: Landscape,
}

impl LandscapeEvaluator {
    pub fn new(landscape: Landscape) -> LandscapeEvaluator {
        LandscapeEvaluator { landscape }
    }

    pub fn landscape(&self) -> &Landscape {
        &self.landscape
    }
}

impl Evaluator for LandscapeEvaluator {
    fn device(&self) -> String {
        self.landscape.meta.device.clone()
    }

    fn template_hash(&self) -> String {
        self.landscape.meta.template_hash.clone()
    }

    fn toolchain(&self) -> String {
        self.landscape.meta.toolchain.clone()
    }

    fn evaluate(&mut self, batch: &[Genome]) -> Result<Vec<Evaluation>, EvaluatorError> {
        batch
            .iter()
            .map(|g| {
                self.landscape.get(&g.id()).cloned().ok_or_else(|| {
                    EvaluatorError::new(format!(
                        "genome {} ({}) was not measured in the landscape at {}; replay answers only recorded genomes (restrict the search to the landscape's sub-space, or record more with `evo landscape`)",
                        g.id(),
                        g.summary(),
                        self.landscape.dir.display()
                    ))
                })
            })
            .collect()
    }

    fn describe(&self) -> String {
        self.landscape.banner()
    }
}
