//! The backward entries of a dispatch table (`[[backward]]`): which backward genome
//! serves a head dim and dtype.
//!
//! The backward is not dispatched by shape class: until a backward search has run there
//! is one design per head dim (FlashAttention-2's), and its entry says so in `origin`,
//! so that nobody reads it as a searched champion. A table written before backward
//! entries existed has none and still loads; an export of it has no backward, and its
//! runtime says so (status UNSUPPORTED) instead of failing.

use super::{check_champion_path, DispatchError, DispatchTable};
use crate::file::GenomeError;
use crate::problem::{Dtype, HeadDim};
use crate::Pass;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One `[[backward]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackwardEntry {
    /// The head dim it serves (64, 96, 128 or 256).
    pub head_dim: u32,
    /// The dtype it serves; absent: both (a genome is compiled for either).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<Dtype>,
    /// The backward genome file, relative to the table's folder and inside it.
    pub genome: String,
    /// Where the genome comes from: the search that found it, or why none has run.
    pub origin: String,
}

impl BackwardEntry {
    /// The `(head dim, dtype)` pairs it serves.
    pub fn serves(&self) -> Vec<(u32, Dtype)> {
        match self.dtype {
            Some(d) => vec![(self.head_dim, d)],
            None => Dtype::ALL.map(|d| (self.head_dim, d)).to_vec(),
        }
    }

    /// A readable key for messages and file names: `d64`, `d64-bf16`.
    pub fn label(&self) -> String {
        match self.dtype {
            Some(d) => format!("d{}-{d}", self.head_dim),
            None => format!("d{}", self.head_dim),
        }
    }
}

impl DispatchTable {
    /// The backward entry for a head dim and dtype (the load's checks keep it unique);
    /// none when the table has no backward for them.
    pub fn backward_for(&self, head_dim: HeadDim, dtype: Dtype) -> Option<&BackwardEntry> {
        self.backward
            .iter()
            .find(|b| b.serves().contains(&(head_dim.get(), dtype)))
    }

    /// The checks of [`DispatchTable::load`] on the backward entries: a head dim evo
    /// builds, a genome path inside the folder, an origin, and one entry per head dim
    /// and dtype.
    pub(super) fn check_backward(&self, path: &Path) -> Result<(), DispatchError> {
        let bad = |b: &BackwardEntry, field: &str, message: String| DispatchError::Backward {
            path: path.to_path_buf(),
            entry: b.label(),
            field: field.to_string(),
            message,
        };
        for (i, b) in self.backward.iter().enumerate() {
            if HeadDim::try_from(b.head_dim).is_err() {
                return Err(bad(
                    b,
                    "head_dim",
                    format!(
                        "is {}; evo builds head dims 64, 96, 128 and 256",
                        b.head_dim
                    ),
                ));
            }
            check_champion_path(&b.genome)
                .map_err(|m| bad(b, "genome", format!("is `{}`: {m}", b.genome)))?;
            if b.origin.trim().is_empty() {
                return Err(bad(
                    b,
                    "origin",
                    "is empty; say where the genome comes from (the search's experiment, \
                     or \"not searched yet: ...\")"
                        .into(),
                ));
            }
            let earlier = self.backward[..i].iter().flat_map(|o| o.serves());
            if let Some((d, dtype)) = earlier
                .filter(|s| b.serves().contains(s))
                .collect::<Vec<_>>()
                .first()
            {
                return Err(bad(
                    b,
                    "dtype",
                    format!(
                        "serves D{d} {dtype}, which an earlier entry serves; keep one entry \
                         per head dim and dtype"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Reads every backward entry's genome from `dir` (the table's folder): inside the
    /// folder (a symlink out of it is refused) and of a backward family. `path` labels
    /// errors. In the entries' order.
    pub fn load_backward(
        &self,
        dir: &Path,
        path: &Path,
    ) -> Result<Vec<crate::GenomeFile>, DispatchError> {
        let root = dir.canonicalize().map_err(|error| GenomeError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let mut files = Vec::with_capacity(self.backward.len());
        for b in &self.backward {
            let file = dir.join(&b.genome);
            let real = file.canonicalize().map_err(|error| GenomeError::Io {
                path: file.clone(),
                error,
            })?;
            let bad = |message: String| DispatchError::Backward {
                path: path.to_path_buf(),
                entry: b.label(),
                field: "genome".into(),
                message,
            };
            if !real.starts_with(&root) {
                return Err(bad(format!(
                    "is `{}`, which leads to {}, outside {}; a genome file lives in its \
                     table's folder",
                    b.genome,
                    real.display(),
                    dir.display()
                )));
            }
            let genome = crate::GenomeFile::load(&file)?;
            if genome.genes.pass() != Pass::Backward {
                return Err(bad(format!(
                    "is `{}`, a genome of the {} family, which computes the {}; a backward \
                     entry names a genome of a backward family (e.g. ampere_bwd)",
                    b.genome,
                    genome.genes.family.label(),
                    genome.genes.pass()
                )));
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
    use crate::dispatch::DISPATCH_FILE;

    /// A folder of its own for one test, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("evo-dispatch-bwd-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn entry(head_dim: u32, dtype: Option<Dtype>, genome: &str) -> BackwardEntry {
        BackwardEntry {
            head_dim,
            dtype,
            genome: genome.into(),
            origin: "not searched yet: FlashAttention-2's design".into(),
        }
    }

    const FA2_BWD: &str = "[genes]\nfamily = \"ampere_bwd\"\nblock_n = 128\nblock_m = 64\n\
        warps = 8\nkv_load = \"cp_async\"\nstages = 2\nsmem_layout = \"swizzled\"\n\
        vec_bytes = 16\nexp = \"exp2\"\ndq_mode = \"atomic\"\nreg_cap = \"none\"\nmin_blocks = 1\n";

    #[test]
    fn backward_entries_round_trip_and_serve_their_head_dim_and_dtype() {
        let mut t = table();
        t.backward = vec![
            entry(64, None, "bwd-d64.toml"),
            entry(128, Some(Dtype::Bf16), "bwd-d128-bf16.toml"),
            entry(128, Some(Dtype::F16), "bwd-d128.toml"),
        ];
        let dir = Scratch::new();
        let path = dir.path().join(DISPATCH_FILE);
        std::fs::write(&path, t.to_toml_string("a test")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("[[backward]]"), "{text}");
        let back = DispatchTable::load(&path).unwrap();
        assert_eq!(back, t);
        let d128 = HeadDim::try_from(128).unwrap();
        let for_dim = |d, dtype| back.backward_for(d, dtype).map(|b| b.genome.as_str());
        assert_eq!(for_dim(d128, Dtype::Bf16), Some("bwd-d128-bf16.toml"));
        assert_eq!(for_dim(d128, Dtype::F16), Some("bwd-d128.toml"));
        assert_eq!(
            for_dim(HeadDim::try_from(64).unwrap(), Dtype::Bf16),
            Some("bwd-d64.toml")
        );
        assert_eq!(for_dim(HeadDim::try_from(256).unwrap(), Dtype::F16), None);
    }

    #[test]
    fn a_table_without_backward_entries_loads_with_none() {
        let dir = Scratch::new();
        let path = dir.path().join(DISPATCH_FILE);
        // Written as tables were before `[[backward]]`.
        std::fs::write(
            &path,
            "device = \"H100\"\n\n[[class]]\nname = \"b1-h8-l512-d64\"\n\
             shape = \"1,8,512,512,64,f16\"\nchampion = \"b1-h8-l512-d64.toml\"\n\
             experiment = \"experiments/x\"\n",
        )
        .unwrap();
        let t = DispatchTable::load(&path).unwrap();
        assert!(t.backward.is_empty());
        assert!(t
            .backward_for(HeadDim::try_from(64).unwrap(), Dtype::F16)
            .is_none());
        assert!(!t.to_toml_string("").contains("backward"));
        assert!(t.load_backward(dir.path(), &path).unwrap().is_empty());
    }

    #[test]
    fn bad_backward_entries_name_the_file_entry_and_field() {
        let dir = Scratch::new();
        let path = dir.path().join(DISPATCH_FILE);
        let load = |backward: Vec<BackwardEntry>| {
            let t = DispatchTable {
                backward,
                ..table()
            };
            std::fs::write(&path, t.to_toml_string("")).unwrap();
            DispatchTable::load(&path).map_err(|e| e.to_string())
        };
        let cases = [
            (
                vec![entry(80, None, "b.toml")],
                "entry `d80`: field `head_dim` is 80",
            ),
            (
                vec![entry(64, None, "../b.toml")],
                "entry `d64`: field `genome` is `../b.toml`",
            ),
            (
                vec![
                    entry(64, None, "a.toml"),
                    entry(64, Some(Dtype::F16), "b.toml"),
                ],
                "entry `d64-f16`: field `dtype` serves D64 f16, which an earlier entry serves",
            ),
            (
                vec![BackwardEntry {
                    origin: " ".into(),
                    ..entry(64, None, "a.toml")
                }],
                "field `origin` is empty",
            ),
        ];
        for (backward, want) in cases {
            let e = load(backward).unwrap_err();
            assert!(
                e.contains("dispatch.toml") && e.contains(want),
                "{want}: {e}"
            );
        }
        // A misspelt field is an error that names it, not a silently ignored line.
        let typo = table().to_toml_string("")
            + "\n[[backward]]\nhead_dim = 64\ngenome = \"a.toml\"\norigin = \"x\"\ndtypes = \"f16\"\n";
        std::fs::write(&path, typo).unwrap();
        let e = DispatchTable::load(&path).unwrap_err().to_string();
        assert!(e.contains("dtypes"), "{e}");
    }

    #[test]
    fn a_backward_entry_names_a_backward_genome_inside_the_folder() {
        let dir = Scratch::new();
        let path = dir.path().join(DISPATCH_FILE);
        std::fs::write(
            dir.path().join("bwd-d64.toml"),
            format!("name = \"fa2-bwd\"\n{FA2_BWD}"),
        )
        .unwrap();
        let t = DispatchTable {
            backward: vec![entry(64, None, "bwd-d64.toml")],
            ..table()
        };
        let files = t.load_backward(dir.path(), &path).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].genes.pass(), Pass::Backward);
        // A forward genome in a backward entry is refused, naming the family.
        let forward = crate::GenomeFile {
            name: "fwd".into(),
            description: String::new(),
            genes: crate::Genome::baseline(),
        };
        std::fs::write(dir.path().join("fwd.toml"), forward.to_toml_string()).unwrap();
        let t = DispatchTable {
            backward: vec![entry(64, None, "fwd.toml")],
            ..table()
        };
        let e = t.load_backward(dir.path(), &path).unwrap_err().to_string();
        assert!(
            e.contains("entry `d64`: field `genome`") && e.contains("computes the forward"),
            "{e}"
        );
        let t = DispatchTable {
            backward: vec![entry(64, None, "missing.toml")],
            ..table()
        };
        let e = t.load_backward(dir.path(), &path).unwrap_err().to_string();
        assert!(e.contains("missing.toml"), "{e}");
        // And a backward genome as a class's champion is refused the other way round.
        let t = table();
        std::fs::write(
            dir.path().join(&t.classes[0].champion),
            format!("name = \"champion-{}\"\n{FA2_BWD}", t.classes[0].name),
        )
        .unwrap();
        let e = t.load_champions(dir.path(), &path).unwrap_err().to_string();
        assert!(
            e.contains("ampere_bwd family") && e.contains("goes in [[backward]]"),
            "{e}"
        );
    }
}
