//! The checks a table passes on load: shapes that parse, one class per name, each
//! champion file its own and inside the table's folder, every figure a time; and, for a
//! champions folder, each champion file the class's own genome, the one its figures
//! were measured on; the backward entries' own checks (dispatch/backward.rs) last. An export or a bench would otherwise print one kernel's figures
//! for another, or read a file outside the folder.

use super::{DispatchError, DispatchTable, ShapeClass};
use crate::file::GenomeError;
use std::path::Path;

impl ShapeClass {
    /// Every recorded time, with its field's name (for the check that each is a time).
    fn figures(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = [
            ("median_us", self.median_us),
            ("cudnn_us", self.cudnn_us),
            ("speedup_vs_cudnn", self.speedup_vs_cudnn),
            ("cold_us", self.cold_us),
            ("cudnn_cold_us", self.cudnn_cold_us),
        ]
        .into_iter()
        .filter_map(|(f, v)| Some((f.to_string(), v?)))
        .collect();
        for b in &self.baselines {
            for (f, v) in [("us", b.us), ("cold_us", b.cold_us)] {
                if let Some(v) = v {
                    out.push((format!("baseline `{}` {f}", b.backend), v));
                }
            }
        }
        out
    }
}

/// A champion file is named relative to its table and stays in the table's folder: an
/// export or a bench would otherwise read (and `evo champions` write) another file.
pub(super) fn check_champion_path(champion: &str) -> Result<(), &'static str> {
    let path = Path::new(champion);
    if champion.is_empty() {
        return Err("empty; name the champion's genome file, e.g. CLASS.toml");
    }
    if path.is_absolute() || path.has_root() {
        return Err("an absolute path; name the file relative to the table's folder");
    }
    if !path
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return Err("it leaves the table's folder (`..` or `.`); name a file inside it");
    }
    Ok(())
}

impl DispatchTable {
    /// Checks a table just read from `path` (which labels errors).
    pub(super) fn check(&self, path: &Path) -> Result<(), DispatchError> {
        for (i, c) in self.classes.iter().enumerate() {
            c.problem().map_err(|message| DispatchError::Shape {
                path: path.to_path_buf(),
                class: c.name.clone(),
                shape: c.shape.clone(),
                message,
            })?;
            if self.classes[..i].iter().any(|o| o.name == c.name) {
                return Err(DispatchError::Duplicate {
                    path: path.to_path_buf(),
                    class: c.name.clone(),
                });
            }
            check_champion_path(&c.champion).map_err(|message| DispatchError::ChampionPath {
                path: path.to_path_buf(),
                class: c.name.clone(),
                champion: c.champion.clone(),
                message: message.to_string(),
            })?;
            if let Some(o) = self.classes[..i].iter().find(|o| o.champion == c.champion) {
                return Err(DispatchError::SharedChampion {
                    path: path.to_path_buf(),
                    first: o.name.clone(),
                    second: c.name.clone(),
                    champion: c.champion.clone(),
                });
            }
            for (field, value) in c.figures() {
                if !(value.is_finite() && value > 0.0) {
                    return Err(DispatchError::Figure {
                        path: path.to_path_buf(),
                        class: c.name.clone(),
                        field,
                        value,
                    });
                }
            }
        }
        self.check_backward(path)
    }

    /// Reads every class's champion file from `dir` (the table's folder) and checks that
    /// it is that class's: inside the folder (a symlink out of it is refused), named
    /// `champion-CLASS`, and the genome the class's figures were measured on; a table
    /// without a class is refused (an export or a bench of it would do nothing and say
    /// it succeeded). `path` labels errors. The export's runtime reads kernels, not
    /// genomes, and skips this.
    pub fn load_champions(
        &self,
        dir: &Path,
        path: &Path,
    ) -> Result<Vec<crate::GenomeFile>, DispatchError> {
        if self.classes.is_empty() {
            return Err(DispatchError::Empty {
                path: path.to_path_buf(),
            });
        }
        let root = dir.canonicalize().map_err(|error| GenomeError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let mut files = Vec::with_capacity(self.classes.len());
        for c in &self.classes {
            let file = dir.join(&c.champion);
            let real = file.canonicalize().map_err(|error| GenomeError::Io {
                path: file.clone(),
                error,
            })?;
            if !real.starts_with(&root) {
                return Err(DispatchError::ChampionPath {
                    path: path.to_path_buf(),
                    class: c.name.clone(),
                    champion: c.champion.clone(),
                    message: format!(
                        "it leads to {}, outside {}; a champion file lives in its table's folder",
                        real.display(),
                        dir.display()
                    ),
                });
            }
            let genome = crate::GenomeFile::load(&file)?;
            if genome.genes.pass() != crate::Pass::Forward {
                return Err(DispatchError::ChampionPath {
                    path: path.to_path_buf(),
                    class: c.name.clone(),
                    champion: c.champion.clone(),
                    message: format!(
                        "a genome of the {} family, which computes the {}; a class's \
                         champion is a forward genome (a backward one goes in [[backward]])",
                        genome.genes.family.label(),
                        genome.genes.pass()
                    ),
                });
            }
            if genome.name != format!("champion-{}", c.name) {
                return Err(DispatchError::NotItsChampion {
                    path: path.to_path_buf(),
                    file,
                    class: c.name.clone(),
                    name: genome.name,
                });
            }
            let actual = genome.genes.id().to_string();
            if let Some(recorded) = c.genome_id.as_ref().filter(|id| **id != actual) {
                return Err(DispatchError::StaleFigures {
                    path: path.to_path_buf(),
                    class: c.name.clone(),
                    recorded: recorded.clone(),
                    file,
                    actual,
                });
            }
            files.push(genome);
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::table;
    use super::*;
    use crate::dispatch::{BaselineFigure, DISPATCH_FILE};

    #[test]
    fn champion_paths_stay_in_the_folder_and_figures_are_times() {
        let dir = std::env::temp_dir().join(format!("evo-dispatch-paths-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(DISPATCH_FILE);
        let load = |t: &DispatchTable| {
            std::fs::write(&path, t.to_toml_string("")).unwrap();
            DispatchTable::load(&path).map_err(|e| e.to_string())
        };
        assert!(load(&table()).is_ok());
        for (champion, want) in [
            ("../x.toml", "leaves the table's folder"),
            ("a/../../x.toml", "leaves the table's folder"),
            ("/etc/x.toml", "an absolute path"),
            ("", "empty"),
        ] {
            let mut t = table();
            t.classes[2].champion = champion.into();
            let e = load(&t).unwrap_err();
            assert!(
                e.contains(&format!("field `champion` is `{champion}`")) && e.contains(want),
                "{champion}: {e}"
            );
        }
        let mut t = table();
        t.classes[3].champion = t.classes[1].champion.clone();
        let e = load(&t).unwrap_err();
        assert!(e.contains("both name champion"), "{e}");
        for bad in [f64::NAN, f64::INFINITY, 0.0, -3.0] {
            let mut t = table();
            t.classes[0].baselines.push(BaselineFigure {
                backend: "sdpa-flash".into(),
                us: Some(bad),
                cold_us: None,
            });
            let e = load(&t).unwrap_err();
            assert!(e.contains("field `baseline `sdpa-flash` us`"), "{bad}: {e}");
        }
        let empty = DispatchTable {
            device: "H100".into(),
            classes: Vec::new(),
            backward: Vec::new(),
        };
        let e = empty.load_champions(&dir, &path).unwrap_err().to_string();
        assert!(e.contains("no class"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
