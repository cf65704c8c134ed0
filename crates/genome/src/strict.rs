//! The genes a genome FILE must state: every gene of its family, and none of another's.
//!
//! A genome file is a design a person writes or reads. A gene left out would take a
//! default nobody chose, and one that does not apply to the family (an Ampere tile in a
//! Hopper file) would read as part of the design while shaping nothing. Records (the
//! JSON evaluations and lineages of older builds) are read through the lenient serde
//! form instead: they leave genes at their default out, and must still load.

use crate::file::{line_col, TomlError};
use crate::gene::Gene;
use crate::genes::Family;
use std::path::Path;

/// Checks the `[genes]` table of a genome file's TOML against its family. A file whose
/// table or family does not parse is left to the typed parse, which names the fault.
pub(crate) fn check_genes_stated(text: &str, path: &Path) -> Result<(), TomlError> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Ok(());
    };
    let Some(genes) = table.get("genes").and_then(toml::Value::as_table) else {
        return Ok(());
    };
    let family = match genes.get("family").map(toml::Value::as_str) {
        None => Family::Ampere,
        Some(Some(label)) => match Family::ALL.iter().find(|f| f.label() == label) {
            Some(&f) => f,
            None => return Ok(()),
        },
        Some(None) => return Ok(()),
    };
    let error = |offset: usize, message: String| {
        let (line, column) = line_col(text, offset);
        TomlError {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    };
    let stated = |gene: Gene| genes.contains_key(gene.name());
    if let Some(gene) = Gene::ALL
        .into_iter()
        .find(|&g| stated(g) && !g.applies(family))
    {
        return Err(error(
            key_offset(text, gene.name()),
            format!(
                "gene `{}` does not apply to the {family} family: it shapes only {} kernels; \
                 remove the line, or set family = {} if the design is meant for that family",
                gene.name(),
                families_of(gene, |f| f.label().to_string()).join(" and "),
                families_of(gene, |f| format!("\"{f}\"")).join(" or ")
            ),
        ));
    }
    // `family` itself may be left out: a file without it is Ampere, as every file
    // written before the Hopper family.
    let missing: Vec<Gene> = Gene::ALL
        .into_iter()
        .filter(|&g| g != Gene::Family && g.applies(family) && !stated(g))
        .collect();
    if !missing.is_empty() {
        return Err(error(
            key_offset(text, "[genes]"),
            missing_message(family, &missing),
        ));
    }
    Ok(())
}

/// The error for genes a genome leaves out: each gene with its alleles, so the fix can
/// be copied. Shared with the typed reader (`raw::RawGenome`), which finds an Ampere
/// genome's missing genes first.
pub(crate) fn missing_message(family: Family, missing: &[Gene]) -> String {
    let names: Vec<String> = missing.iter().map(|g| format!("`{}`", g.name())).collect();
    let lines: Vec<String> = missing
        .iter()
        .map(|&g| format!("{} = {}", g.name(), alleles(g)))
        .collect();
    let (noun, verb) = if missing.len() == 1 {
        ("gene", "is")
    } else {
        ("genes", "are")
    };
    format!(
        "{noun} {} {verb} missing: {} {family} genome states every gene of its family; add {}",
        names.join(", "),
        if family.label().starts_with('a') {
            "an"
        } else {
            "a"
        },
        lines.join("; ")
    )
}

/// The families a gene shapes, each written by `write`.
fn families_of(gene: Gene, write: impl Fn(Family) -> String) -> Vec<String> {
    Family::ALL
        .iter()
        .filter(|&&f| gene.applies(f))
        .map(|&f| write(f))
        .collect()
}

/// A gene's alleles as TOML values: `one of "off", "on"` or `one of 1, 2, 4`.
fn alleles(gene: Gene) -> String {
    let values: Vec<String> = gene
        .allele_labels()
        .into_iter()
        .map(|label| toml_value(&label).to_string())
        .collect();
    format!("one of {}", values.join(", "))
}

/// An allele label as TOML writes it: numbers bare, words quoted.
pub(crate) fn toml_value(label: &str) -> toml::Value {
    label
        .parse::<i64>()
        .map_or_else(|_| toml::Value::from(label), toml::Value::from)
}

/// The byte offset of the first line that starts with `key` (a key or a table header),
/// or 0: only labels the error.
fn key_offset(text: &str, key: &str) -> usize {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key) {
            let rest = rest.trim_start();
            if key.starts_with('[') || rest.starts_with('=') {
                return offset + (line.len() - trimmed.len());
            }
        }
        offset += line.len();
    }
    0
}
