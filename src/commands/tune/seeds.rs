//! The seeds folder of one shape's search: what `evo evolve --genomes` starts it from.
//!
//! A search starts best from kernels that are already good near its shape: the
//! champion the dispatch table would serve the shape with, and the champions of its
//! nearest other classes (the same head dim first, then the closest lengths), at most
//! [`MAX_CHAMPIONS`] in all; then the named forward genomes (the hand-made designs).
//! The files are copied as they are, so `evo evolve` reads them as it reads any named
//! genome (`*.toml` at the folder's top, keyed by their `name`).
//!
//! The folder is written once, before its search first starts, and kept: a resumed
//! search looks its seeds up by name in it, and a table changed in between must not take
//! them away.

use crate::commands::champions::load_table;
use anyhow::{bail, Context};
use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::{GenomeFile, Pass, Problem};
use std::path::{Path, PathBuf};

/// Champion seeds per search, the dispatched one included.
pub const MAX_CHAMPIONS: usize = 3;

/// Where the seeds come from: a champions folder's table (if it has one) and the named
/// forward genomes.
pub struct SeedSource {
    table: Option<(PathBuf, DispatchTable)>,
    named: Vec<PathBuf>,
}

impl SeedSource {
    /// Reads the table of `from` (a missing one is said once: the searches start from
    /// the named genomes alone; a damaged one is an error) and the forward genomes at
    /// the top of `genomes`.
    pub fn open(from: &Path, genomes: &Path) -> anyhow::Result<SeedSource> {
        let table = if from.join(DISPATCH_FILE).exists() {
            let (table, _) = load_table(from)?;
            Some((from.to_path_buf(), table))
        } else {
            eprintln!(
                "note: no dispatch table at {}: the searches start from the named genomes of {} only",
                from.join(DISPATCH_FILE).display(),
                genomes.display()
            );
            None
        };
        let entries = std::fs::read_dir(genomes).with_context(|| {
            format!(
                "{}: cannot list the named genomes (use --genomes DIR)",
                genomes.display()
            )
        })?;
        let mut named = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "toml")
                && GenomeFile::load(&path)?.genes.pass() == Pass::Forward
            {
                named.push(path);
            }
        }
        named.sort();
        if named.is_empty() && table.is_none() {
            bail!(
                "{} holds no forward genome and {} no dispatch table: a search would have no seed; name a folder of genomes with --genomes",
                genomes.display(),
                from.display()
            );
        }
        Ok(SeedSource { table, named })
    }

    /// The champion files that seed a search of `p`, the dispatched one first.
    pub fn champions_for(&self, p: &Problem) -> Vec<PathBuf> {
        let Some((dir, table)) = &self.table else {
            return Vec::new();
        };
        let chosen = table
            .choose(p, &dir.join(DISPATCH_FILE))
            .ok()
            .map(|c| c.class.name.clone());
        let gap = |q: &Problem| {
            let log = |n: u32| (n as f64).log2();
            (log(q.q_len) - log(p.q_len)).abs() + (log(q.kv_len) - log(p.kv_len)).abs()
        };
        let mut others: Vec<(bool, f64, &str, &str)> = table
            .classes
            .iter()
            .filter(|c| Some(&c.name) != chosen.as_ref())
            .filter_map(|c| {
                let q = c.problem().ok()?;
                Some((
                    q.head_dim != p.head_dim,
                    gap(&q),
                    c.name.as_str(),
                    c.champion.as_str(),
                ))
            })
            .collect();
        others.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let chosen_file = chosen.and_then(|name| {
            table
                .classes
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.champion.as_str())
        });
        chosen_file
            .into_iter()
            .chain(others.into_iter().map(|o| o.3))
            .take(MAX_CHAMPIONS)
            .map(|file| dir.join(file))
            .collect()
    }

    /// Writes the seeds folder of `p` at `folder` unless it is there; returns how many
    /// champions and named genomes it holds (`None`: kept as it was).
    pub fn write(&self, p: &Problem, folder: &Path) -> anyhow::Result<Option<(usize, usize)>> {
        if folder.is_dir() {
            return Ok(None);
        }
        let champions = self.champions_for(p);
        let name = folder
            .file_name()
            .map_or("seeds".into(), |n| n.to_string_lossy().into_owned());
        // Built beside, then renamed: a folder that exists is always whole.
        let tmp = folder.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("{}: cannot create", tmp.display()))?;
        for file in champions.iter().chain(&self.named) {
            let to = tmp.join(file.file_name().expect("a file in a folder"));
            std::fs::copy(file, &to).with_context(|| {
                format!("cannot copy seed {} to {}", file.display(), to.display())
            })?;
        }
        std::fs::rename(&tmp, folder)
            .with_context(|| format!("{}: cannot write", folder.display()))?;
        Ok(Some((champions.len(), self.named.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dispatched_champion_comes_first_then_the_nearest_of_its_head_dim() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let source =
            SeedSource::open(&root.join("genomes/champions/h100"), &root.join("genomes")).unwrap();
        assert!(source.named.iter().all(|p| !p.ends_with("fa2-bwd.toml")));
        let names = |spec: &str| -> Vec<String> {
            source
                .champions_for(&spec.parse().unwrap())
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let decode = names("16,32,1,8192,128,f16,causal=br,kv=8");
        assert_eq!(decode.len(), MAX_CHAMPIONS);
        assert_eq!(decode[0], "b16-h32kv8-lq1-lk8192-d128-causal-br.toml");
        assert_eq!(decode[1], "b16-h32kv1-lq1-lk8192-d128-causal-br.toml");
        // D96 has one class: it first, then the other head dims' nearest.
        let phi = names("1,32,2048,2048,96,f16,causal");
        assert_eq!(phi[0], "b1-h32-l4096-d96-causal.toml");
        assert_eq!(phi.len(), MAX_CHAMPIONS);
    }

    #[test]
    fn a_seeds_folder_is_written_once_and_evolve_can_read_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let source =
            SeedSource::open(&root.join("genomes/champions/h100"), &root.join("genomes")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("b1.seeds");
        let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let (champions, named) = source.write(&p, &folder).unwrap().unwrap();
        assert_eq!(champions, MAX_CHAMPIONS);
        assert!(named >= 4);
        let mut names = Vec::new();
        for e in std::fs::read_dir(&folder).unwrap() {
            let file = GenomeFile::load(&e.unwrap().path()).unwrap();
            assert_eq!(file.genes.pass(), Pass::Forward);
            names.push(file.name);
        }
        assert!(
            names.contains(&"champion-b1-h8-l512-d64".to_string()),
            "{names:?}"
        );
        assert_eq!(names.len(), champions + named);
        assert_eq!(source.write(&p, &folder).unwrap(), None);
    }
}
