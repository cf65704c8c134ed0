//! `experiment.toml`: what an experiment folder was asked to do.
//!
//! ```toml
//! name = "2026-11-22-h100-evolutionary-s1"
//! strategy = "evolutionary"      # evolutionary | random | exhaustive | guided
//! seed = 1
//! backend = "auto"               # auto | gpu | replay:DIR
//! seeds = ["v3", "v5", "v6a", "v7a", "fa2"]   # named genomes that start the population
//!
//! [budget]
//! evaluations = 200              # or: minutes = 30
//!
//! [evolutionary]
//! population = 16
//! elites = 2
//! # steady = true               # no generation barrier (see `steady.rs`)
//! # in_flight = 22              # candidates a steady search keeps on their way
//!
//! [problem]                      # optional; replay takes the landscape's
//! batch = 1
//! # ...
//! ```
//! Errors name the file, the line and the field.

use crate::island::IslandConfig;
use crate::search::Budget;
use crate::space::SubSpace;
use crate::strategy::{EvolutionParams, StrategyKind};
use evo_genome::{from_toml, Pass, Problem, Target, TomlError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// The file name inside an experiment folder.
pub const EXPERIMENT_FILE: &str = "experiment.toml";

/// The longest wall budget, in minutes: a year. Longer is a typo, and past about 5e15
/// minutes the budget no longer fits a `Duration` at all.
pub const MAX_MINUTES: f64 = 525_600.0;

/// `target = "sm_90"` (also `"sm90"`, `"90"`).
pub mod target_serde {
    use evo_genome::Target;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Target, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.arch())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        let s = String::deserialize(d)?;
        Target::parse(&s.replace("sm90", "sm_90").replace("sm89", "sm_89")).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown target `{s}`; expected \"sm_89\" or \"sm_90\""
            ))
        })
    }
}

mod opt_target_serde {
    use evo_genome::Target;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<Target>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::target_serde::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Target>, D::Error> {
        super::target_serde::deserialize(d).map(Some)
    }
}

/// Where evaluations come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The GPU if a CUDA device is present, else replay of the default landscape.
    Auto,
    Gpu,
    Replay(PathBuf),
}

impl Backend {
    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "auto" => Some(Backend::Auto),
            "gpu" => Some(Backend::Gpu),
            _ => s
                .strip_prefix("replay:")
                .filter(|d| !d.is_empty())
                .map(|d| Backend::Replay(PathBuf::from(d))),
        }
    }
}

/// `[budget]`: exactly one of the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<f64>,
}

fn is_forward(p: &Pass) -> bool {
    *p == Pass::Forward
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    pub name: String,
    pub strategy: StrategyKind,
    pub seed: u64,
    /// `auto`, `gpu` or `replay:DIR`.
    pub backend: String,
    /// The pass the search's kernels compute: a backward search moves among backward
    /// families only (absent: forward, every experiment recorded before the backward).
    #[serde(default, skip_serializing_if = "is_forward")]
    pub pass: Pass,
    /// Named genomes (`genomes/<name>.toml`) that start the evolutionary population.
    #[serde(default)]
    pub seeds: Vec<String>,
    pub budget: BudgetConfig,
    #[serde(default)]
    pub evolutionary: EvolutionParams,
    /// The objective; on replay the landscape's problem is used and this must match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
    /// A suite objective instead of one problem: the score is the geometric mean of the
    /// medians over these shapes (GPU backend only; `problem` is then not used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suite: Vec<Problem>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_target_serde"
    )]
    pub target: Option<Target>,
    /// The sub-space of an exhaustive walk (replay uses the landscape's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subspace: Option<SubSpace>,
    /// One island of an island-model search (evolutionary only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub island: Option<IslandConfig>,
    /// The guided strategy: the folder of recorded evaluations its cost model learns
    /// from (the search's own shape left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_data: Option<std::path::PathBuf>,
}

#[derive(Debug, Error)]
pub enum ConfigError {
    /// The OS error is in the message, not a `source`: `{:#}` would print it twice.
    #[error("{path}: cannot read: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// As `Read`: the OS error once, in the message.
    #[error("{path}: cannot write: {error}")]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Parse(#[from] TomlError),
    #[error("{path}:{line}: field `{field}`: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
}

/// The 1-based line where `key = ...` is first written, or 1.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(1, |i| i + 1)
}

impl ExperimentConfig {
    /// Parses and checks the text; `path` only labels errors.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<ExperimentConfig, ConfigError> {
        let config: ExperimentConfig = from_toml(text, path)?;
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of(text, field.rsplit('.').next().unwrap_or(field)),
            field: field.to_string(),
            message,
        };
        if Backend::parse(&config.backend).is_none() {
            return Err(invalid(
                "backend",
                format!(
                    "`{}` is not a backend; use \"auto\", \"gpu\" or \"replay:DIR\"",
                    config.backend
                ),
            ));
        }
        match (config.budget.evaluations, config.budget.minutes) {
            (Some(0), _) => return Err(invalid("budget.evaluations", "must be at least 1".into())),
            (_, Some(m)) if !(m > 0.0 && m <= MAX_MINUTES) => {
                return Err(invalid(
                    "budget.minutes",
                    format!(
                        "{} is out of range: give a number of minutes above 0 and at most {MAX_MINUTES} (a year)",
                        // 1e308 as written, not as 309 digits.
                        if m.abs() < 1e9 { m.to_string() } else { format!("{m:e}") }
                    ),
                ));
            }
            (Some(_), Some(_)) | (None, None) => {
                return Err(invalid(
                    "budget",
                    "give exactly one of `evaluations` and `minutes`".into(),
                ))
            }
            _ => {}
        }
        if let Err((field, message)) = config.evolutionary.check() {
            return Err(invalid(&format!("evolutionary.{field}"), message));
        }
        if config.model_data.is_some() != (config.strategy == StrategyKind::Guided) {
            return Err(invalid(
                "model_data",
                format!(
                    "only the guided strategy has a cost model, and it needs its records: strategy = \"{}\" {} model_data",
                    config.strategy,
                    if config.model_data.is_some() { "takes no" } else { "needs" }
                ),
            ));
        }
        if config.strategy == StrategyKind::Guided && !config.suite.is_empty() {
            return Err(invalid(
                "suite",
                "the guided strategy's model ranks genomes for one shape; give one problem, not a suite".into(),
            ));
        }
        if config.evolutionary.steady
            && !matches!(
                config.strategy,
                StrategyKind::Evolutionary | StrategyKind::Guided
            )
        {
            return Err(invalid(
                "evolutionary.steady",
                format!(
                    "a steady-state search breeds from a population; strategy = \"{}\" has none: use \"evolutionary\" or \"guided\"",
                    config.strategy
                ),
            ));
        }
        if let Some(island) = &config.island {
            if let Err((field, message)) = island.check() {
                return Err(invalid(&format!("island.{field}"), message));
            }
            if config.evolutionary.steady {
                return Err(invalid(
                    "island",
                    "islands trade migrants at the ends of generations, and a steady-state search (steady = true) has none".into(),
                ));
            }
            if config.strategy != StrategyKind::Evolutionary {
                return Err(invalid(
                    "island",
                    format!(
                        "islands trade the elites of a population; strategy = \"{}\" has none: use \"evolutionary\"",
                        config.strategy
                    ),
                ));
            }
        }
        if let Some(problem) = &config.problem {
            problem.validate().map_err(|m| invalid("problem", m))?;
        }
        for problem in &config.suite {
            problem.validate().map_err(|m| invalid("suite", m))?;
        }
        Ok(config)
    }

    /// Reads `DIR/experiment.toml`.
    pub fn load(path: &Path) -> Result<ExperimentConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        ExperimentConfig::from_toml_str(&text, path)
    }

    /// Writes the file whole (through a rename): a search killed while saving leaves the
    /// old record or the new one, never a part that no resume can read.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let text = format!(
            "# written by `evo evolve`; edit and re-run to continue this experiment\n{}",
            toml::to_string(self).expect("a config always serializes")
        );
        evo_record::files::write_atomic(path, text.as_bytes()).map_err(|error| ConfigError::Write {
            path: path.to_path_buf(),
            error,
        })
    }

    /// The backend (checked at load).
    pub fn backend(&self) -> Backend {
        Backend::parse(&self.backend).expect("checked when loaded")
    }

    /// The budget (checked at load).
    pub fn budget(&self) -> Budget {
        match (self.budget.evaluations, self.budget.minutes) {
            (Some(n), _) => Budget::Evaluations(n),
            // Bounded at load (MAX_MINUTES), so the conversion cannot overflow.
            (None, Some(m)) => Budget::Wall(Duration::from_secs_f64(m * 60.0)),
            (None, None) => unreachable!("checked when loaded"),
        }
    }
}
