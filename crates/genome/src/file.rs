//! Genome TOML files: `name`, `description` and a `[genes]` table.
//!
//! ```toml
//! # v7a: v6a plus cp.async and one producer warp (the seeds' last hand version)
//! name = "v7a"
//! description = "..."
//!
//! [genes]
//! qk_math = "wmma"
//! # ... every gene, none missing, none unknown
//! ```
//! Every gene of the genome's family must be present: a genome file is a complete
//! design, and a gene silently defaulted would make two different kernels look the
//! same. A Hopper genome (`family = "hopper"`) may leave out the Ampere-only genes.

use crate::genes::Genome;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A named genome as stored in `genomes/*.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenomeFile {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub genes: Genome,
}

/// Errors reading or writing genome files; each names the file, and where it can, the line.
#[derive(Debug, Error)]
pub enum GenomeError {
    /// The OS error is part of the message, not a `source`: a report that prints the
    /// error chain would otherwise print it twice.
    #[error("{path}: cannot read: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Parse(#[from] TomlError),
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl GenomeFile {
    /// Parses TOML text; `path` only labels errors.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<GenomeFile, GenomeError> {
        Ok(from_toml(text, path)?)
    }

    /// Reads and parses a genome file.
    pub fn load(path: &Path) -> Result<GenomeFile, GenomeError> {
        let text = std::fs::read_to_string(path).map_err(|error| GenomeError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// The TOML text of this file (genes in canonical order). Genes that do not apply
    /// to the genome's family (the Ampere genes of a Hopper genome) are left out: they
    /// shape nothing, and a reader would take them for the kernel's design.
    pub fn to_toml_string(&self) -> String {
        let text = toml::to_string(self).expect("a genome always serializes");
        let unused: Vec<&str> = crate::Gene::ALL
            .iter()
            .filter(|g| !g.applies(self.genes.family))
            .map(|g| g.name())
            .collect();
        let mut out = String::with_capacity(text.len());
        let mut in_genes = false;
        for line in text.lines() {
            if line.starts_with('[') {
                in_genes = line.trim() == "[genes]";
            }
            let key = line.split('=').next().unwrap_or("").trim();
            if in_genes && unused.contains(&key) {
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// Writes the file, with an optional comment header.
    pub fn save(&self, path: &Path, header: &str) -> Result<(), GenomeError> {
        let mut text = String::new();
        for line in header.lines() {
            text.push_str("# ");
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&self.to_toml_string());
        std::fs::write(path, text).map_err(|source| GenomeError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// A TOML file that did not parse: the file, the line and column, and toml's message,
/// which names the field. Every TOML file evo reads (genomes, experiments, landscapes,
/// plans) reports its syntax and type errors through this one type.
#[derive(Debug, Error)]
#[error("{path}:{line}:{column}: {message}")]
pub struct TomlError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parses TOML text into `T`; `path` only labels the error.
pub fn from_toml<T: serde::de::DeserializeOwned>(text: &str, path: &Path) -> Result<T, TomlError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |s| line_col(text, s.start));
        TomlError {
            path: path.to_path_buf(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}
