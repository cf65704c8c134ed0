//! The island model: several searches, each its own experiment, trading elites
//! through a shared folder.
//!
//! ```text
//! EXCHANGE/island-0/gen-000004.json   island 0's elites after generation 4
//! EXCHANGE/island-1/gen-000004.json
//! ```
//! Every `every` generations an island writes its best members to a new file, through
//! a temporary name and a rename, so a reader on a shared filesystem sees a whole file
//! or none. Then it reads each other island's newest file and takes in the best
//! elites it has not seen as *immigrants*: they join the population with the other
//! island's measurement and cost no evaluation here.
//!
//! What arrived when depends on how fast the other islands run, so each intake is
//! logged (`migrants.jsonl` in the experiment folder, flushed, one line per exchange,
//! empty ones too). A resumed island replays its intakes from the log instead of the
//! folder and so retraces its own run exactly; only exchanges past the log read the
//! folder again.
//!
//! A search holds the lock of its island's folder in the exchange while it runs
//! ([`claim`]): two searches started as the same island would overwrite each other's
//! elites.

use crate::cache::{read_json_lines, CacheError};
use evo_genome::GenomeId;
use evo_record::files::{this_process, FolderLock, LockError};
use evo_record::Evaluation;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The intake log's file name inside an experiment folder.
pub const MIGRANTS_FILE: &str = "migrants.jsonl";

/// `[island]` of `experiment.toml`: which island this is and how it trades.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IslandConfig {
    /// This island's index, `0..islands`.
    pub island: u32,
    pub islands: u32,
    /// The shared folder the islands publish to.
    pub exchange: PathBuf,
    /// Publish and take in every this many generations.
    #[serde(default = "default_every")]
    pub every: u32,
    /// Elites published, and immigrants taken in, per exchange.
    #[serde(default = "default_migrants")]
    pub migrants: usize,
}

fn default_every() -> u32 {
    2
}

fn default_migrants() -> usize {
    2
}

impl IslandConfig {
    /// Checks the fields; the message names the field.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.islands < 2 {
            return Err((
                "islands",
                format!("islands = {} must be at least 2", self.islands),
            ));
        }
        if self.island >= self.islands {
            return Err((
                "island",
                format!(
                    "island = {} must be below islands = {} (islands count from 0)",
                    self.island, self.islands
                ),
            ));
        }
        if self.every == 0 {
            return Err(("every", "every must be at least 1 generation".into()));
        }
        if self.migrants == 0 {
            return Err(("migrants", "migrants must be at least 1".into()));
        }
        Ok(())
    }

    fn island_dir(&self, island: u32) -> PathBuf {
        self.exchange.join(format!("island-{island}"))
    }
}

/// One elite in transit: its measurement and where it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Migrant {
    /// The island that measured it.
    pub island: u32,
    /// The publisher's generation when it was published.
    pub generation: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub evaluation: Evaluation,
}

impl Migrant {
    fn score(&self) -> f64 {
        let e = &self.evaluation;
        e.score_us.filter(|_| e.is_ok()).unwrap_or(f64::INFINITY)
    }
}

/// One published file.
#[derive(Debug, Serialize, Deserialize)]
struct Published {
    island: u32,
    generation: u32,
    elites: Vec<Migrant>,
}

/// One line of the intake log.
#[derive(Debug, Serialize, Deserialize)]
struct Intake {
    generation: u32,
    migrants: Vec<Migrant>,
}

/// The OS error is in each message, not a `source`: `{:#}` would print it twice.
#[derive(Debug, Error)]
pub enum IslandError {
    #[error("{path}: cannot write this island's elites: {error}")]
    Publish {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: cannot read another island's elites: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: not a file of published elites ({message}); files appear only by rename, so this one was written by something else")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: cannot append to the intake log: {error}")]
    Log {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    LogRecord(#[from] CacheError),
    #[error("island {island} is already running: {lock}")]
    Claimed { island: u32, lock: LockError },
}

/// An island's link to the exchange folder and its own intake log.
#[derive(Debug)]
pub struct Exchange {
    config: IslandConfig,
    log_path: PathBuf,
    log_file: File,
    /// Intakes on record, by generation.
    logged: BTreeMap<u32, Vec<Migrant>>,
    /// Warnings to show the user (a cut-short last line of the log).
    pub warnings: Vec<String>,
}

/// Claims island `config.island` of the exchange for this process: its folder there,
/// locked while the returned value lives. A search takes it before it writes anything,
/// so a second start as the same island is refused and leaves nothing behind.
pub fn claim(config: &IslandConfig) -> Result<FolderLock, IslandError> {
    let dir = config.island_dir(config.island);
    std::fs::create_dir_all(&dir).map_err(|error| IslandError::Publish {
        path: dir.clone(),
        error,
    })?;
    FolderLock::acquire(&dir, &this_process()).map_err(|lock| IslandError::Claimed {
        island: config.island,
        lock,
    })
}

impl Exchange {
    /// Opens the intake log at `log_path` (created when missing) and the island's
    /// folder in the exchange.
    pub fn open(config: IslandConfig, log_path: &Path) -> Result<Exchange, IslandError> {
        let log_err = |source| IslandError::Log {
            path: log_path.to_path_buf(),
            error: source,
        };
        let text = match std::fs::read_to_string(log_path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(log_err(e)),
        };
        let lines = read_json_lines::<Intake>(&text, log_path)?;
        let logged = lines
            .values
            .into_iter()
            .map(|(_, intake)| (intake.generation, intake.migrants))
            .collect();
        let log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(log_err)?;
        if lines.complete_len < text.len() {
            log_file
                .set_len(lines.complete_len as u64)
                .map_err(log_err)?;
        }
        if lines.complete_len > 0 && !text[..lines.complete_len].ends_with('\n') {
            (&log_file).write_all(b"\n").map_err(log_err)?;
        }
        let dir = config.island_dir(config.island);
        std::fs::create_dir_all(&dir).map_err(|source| IslandError::Publish {
            path: dir,
            error: source,
        })?;
        Ok(Exchange {
            config,
            log_path: log_path.to_path_buf(),
            log_file,
            logged,
            warnings: lines.warning.into_iter().collect(),
        })
    }

    pub fn config(&self) -> &IslandConfig {
        &self.config
    }

    /// True when the end of generation `generation` (counted from 0) is an exchange
    /// point: after every `every` generations.
    pub fn due(&self, generation: u32) -> bool {
        (generation + 1).is_multiple_of(self.config.every)
    }

    /// Writes this island's elites after `generation`, whole or not at all.
    pub fn publish(&self, generation: u32, elites: Vec<Migrant>) -> Result<(), IslandError> {
        let file = Published {
            island: self.config.island,
            generation,
            elites,
        };
        let dir = self.config.island_dir(self.config.island);
        let path = dir.join(format!("gen-{generation:06}.json"));
        let text = serde_json::to_string_pretty(&file).expect("elites always serialize");
        evo_lineage::write_atomic(&path, text.as_bytes())
            .map_err(|error| IslandError::Publish { path, error })
    }

    /// The immigrants of the exchange after `generation`: from the log when this
    /// exchange is on record, else the best unseen elites of the other islands' newest
    /// files, which are then logged before they are returned.
    pub fn intake(
        &mut self,
        generation: u32,
        seen: &HashSet<GenomeId>,
    ) -> Result<Vec<Migrant>, IslandError> {
        if let Some(migrants) = self.logged.get(&generation) {
            return Ok(migrants.clone());
        }
        let mut offered: Vec<Migrant> = Vec::new();
        for other in (0..self.config.islands).filter(|&k| k != self.config.island) {
            if let Some(published) = self.newest(other)? {
                offered.extend(published.elites);
            }
        }
        // Best first; ties go to the lower island, then the order published.
        offered.sort_by(|a, b| a.score().total_cmp(&b.score()));
        let mut taken: HashSet<GenomeId> = HashSet::new();
        let migrants: Vec<Migrant> = offered
            .into_iter()
            .filter(|m| m.score().is_finite())
            .filter(|m| {
                let id = &m.evaluation.genome_id;
                !seen.contains(id) && taken.insert(id.clone())
            })
            .take(self.config.migrants)
            .collect();
        let intake = Intake {
            generation,
            migrants,
        };
        let mut line = serde_json::to_string(&intake).expect("an intake always serializes");
        line.push('\n');
        self.log_file
            .write_all(line.as_bytes())
            .and_then(|()| self.log_file.flush())
            .map_err(|source| IslandError::Log {
                path: self.log_path.clone(),
                error: source,
            })?;
        self.logged.insert(generation, intake.migrants.clone());
        Ok(intake.migrants)
    }

    /// The newest file island `island` has published, if any.
    fn newest(&self, island: u32) -> Result<Option<Published>, IslandError> {
        let dir = self.config.island_dir(island);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            // Not started yet: nothing to take.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(IslandError::Read {
                    path: dir,
                    error: source,
                })
            }
        };
        let mut newest: Option<(u32, PathBuf)> = None;
        for entry in entries {
            let entry = entry.map_err(|source| IslandError::Read {
                path: dir.clone(),
                error: source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // Temporary files start with a dot and never match.
            let Some(generation) = name
                .strip_prefix("gen-")
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if newest.as_ref().is_none_or(|(g, _)| generation > *g) {
                newest = Some((generation, entry.path()));
            }
        }
        let Some((_, path)) = newest else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(&path).map_err(|source| IslandError::Read {
            path: path.clone(),
            error: source,
        })?;
        let published: Published = serde_json::from_str(&text).map_err(|e| IslandError::Parse {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(Some(published))
    }
}
