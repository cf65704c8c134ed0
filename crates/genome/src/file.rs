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
//! Every gene of the genome's family must be present, and no gene of the other family:
//! a genome file is a complete design, and a gene silently defaulted (or one stated
//! that shapes nothing) would make two different kernels look the same.

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
    /// As `Io`: the OS error once, in the message.
    #[error("{path}: cannot write: {error}")]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl GenomeFile {
    /// Parses TOML text; `path` only labels errors.
    /// Every gene of the genome's family must be stated, and none of another family's
    /// ([`crate::strict`]).
    pub fn from_toml_str(text: &str, path: &Path) -> Result<GenomeFile, GenomeError> {
        // The typed parse first: it names a wrong allele or an unknown key at its line.
        let file = from_toml(text, path)?;
        crate::strict::check_genes_stated(text, path)?;
        Ok(file)
    }

    /// Reads and parses a genome file.
    pub fn load(path: &Path) -> Result<GenomeFile, GenomeError> {
        let text = std::fs::read_to_string(path).map_err(|error| GenomeError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// The TOML text of this file: every gene of the genome's family in canonical order,
    /// and no other. The genes of the other family shape nothing, and a reader would
    /// take them for the kernel's design; `family` is written for Hopper only (a file
    /// without it is Ampere).
    pub fn to_toml_string(&self) -> String {
        #[derive(Serialize)]
        struct Head<'a> {
            name: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            description: &'a str,
        }
        let head = Head {
            name: &self.name,
            description: &self.description,
        };
        let mut out = toml::to_string(&head).expect("two strings always serialize");
        out.push_str("\n[genes]\n");
        for gene in self.genes.genes() {
            if gene == crate::Gene::Family && self.genes.family == crate::Family::Ampere {
                continue;
            }
            let value = crate::strict::toml_value(&self.genes.allele_label(gene));
            out.push_str(&format!("{} = {value}\n", gene.name()));
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
        std::fs::write(path, text).map_err(|error| GenomeError::Write {
            path: path.to_path_buf(),
            error,
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
