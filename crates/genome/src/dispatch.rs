//! The dispatch table: which champion genome a shape gets, and why.
//!
//! `genomes/champions/<device>/dispatch.toml` lists shape classes, each the shape a
//! champion was evolved for, with the champion's file and its figures from the bench
//! that measured it. A shape that is exactly a class's gets that class's champion; a
//! shape between classes gets the champion of the nearest class by this rule:
//!
//! 1. the head dimension must match (a champion is built and checked for its own);
//! 2. a class of the same kind (causal or not, windowed or not, grouped K/V heads or
//!    not) is preferred; without one, a class with the same causality;
//! 3. among those, the nearest in work, `|log2(B·H·Lq·Lk) - log2(class's)|`
//!    (the grid's size and each CTA's loop length, which decide tile and split choices);
//! 4. ties go to the nearest key length, then to the nearest group (query heads per
//!    K/V head: a multi-query decode and a grouped one of the same work differ in the
//!    rows each K/V tile serves), then to the order of the table.
//!
//! The dtype is not a class: a champion is compiled for either and the bench measures
//! both (f16 and bf16 figures side by side).
//!
//! The backward is dispatched by head dim and dtype alone (`[[backward]]`, see
//! [`backward`](BackwardEntry)).

use crate::file::{from_toml, GenomeError, TomlError};
use crate::problem::{MaskAlign, Problem};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

mod backward;
mod checks;
mod figures;
pub use backward::BackwardEntry;
use checks::check_champion_path;
pub use figures::{BaselineFigure, Comparison};

/// The file a champions folder holds its table in.
pub const DISPATCH_FILE: &str = "dispatch.toml";

/// `dispatch.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchTable {
    /// The GPU the champions were evolved and measured on, as the driver names it.
    pub device: String,
    #[serde(rename = "class", default)]
    pub classes: Vec<ShapeClass>,
    /// The backward genome per head dim and dtype; tables written before it have none.
    #[serde(rename = "backward", default, skip_serializing_if = "Vec::is_empty")]
    pub backward: Vec<BackwardEntry>,
}

/// One shape class: the shape its champion was evolved on, and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeClass {
    /// e.g. `b2-h16-l4096-d128-causal`.
    pub name: String,
    /// `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]`.
    pub shape: String,
    /// The champion's genome file, relative to the table's folder and inside it.
    pub champion: String,
    /// The search it came from.
    pub experiment: String,
    /// The champion's median µs on its shape in the bench that last measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    /// PyTorch SDPA's cuDNN backend in that same run (also among `baselines` when the
    /// table has them; kept for the manifest and for tables written before them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn_us: Option<f64>,
    /// Read from tables written before `baselines`: cudnn_us / median_us. Not written
    /// any more: a ratio against one backend says nothing when another is faster.
    #[serde(default, skip_serializing)]
    pub speedup_vs_cudnn: Option<f64>,
    /// With `--cold-l2`: the champion's median launched alone after a read over the L2,
    /// and cuDNN's the same way, in that same run (the comparison that does not depend
    /// on how each side's back-to-back replays behave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn_cold_us: Option<f64>,
    /// The bench record those figures come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<String>,
    /// The id of the genome those figures were measured on: a champion file holding
    /// another genome does not get them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genome_id: Option<String>,
    /// Every baseline timed on the shape in that run (each SDPA backend that states the
    /// problem, the cuBLAS hybrid where it does): the ratios are against the fastest.
    #[serde(rename = "baseline", default, skip_serializing_if = "Vec::is_empty")]
    pub baselines: Vec<BaselineFigure>,
}

#[derive(Debug, Error)]
pub enum DispatchError {
    #[error(transparent)]
    Toml(#[from] TomlError),
    #[error(transparent)]
    Io(#[from] GenomeError),
    #[error("{path}: class `{class}`: shape `{shape}`: {message}; write it as B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]")]
    Shape {
        path: PathBuf,
        class: String,
        shape: String,
        message: String,
    },
    #[error("{path}: class `{class}` is listed twice; keep one")]
    Duplicate { path: PathBuf, class: String },
    #[error("{path}: no class: a table without a [[class]] dispatches nothing; make one with `evo champions EXPERIMENT... --out DIR`")]
    Empty { path: PathBuf },
    #[error("{path}: class `{class}`: field `champion` is `{champion}`: {message}")]
    ChampionPath {
        path: PathBuf,
        class: String,
        champion: String,
        message: String,
    },
    #[error("{path}: classes `{first}` and `{second}` both name champion `{champion}`; each class has its own champion file (`evo champions` writes CLASS.toml)")]
    SharedChampion {
        path: PathBuf,
        first: String,
        second: String,
        champion: String,
    },
    #[error("{path}: class `{class}`: field `{field}` is {value}; a time is a finite number of µs above 0 (record the figures again: `evo bench --champions DIR --record`)")]
    Figure {
        path: PathBuf,
        class: String,
        field: String,
        value: f64,
    },
    #[error("{file}: its name is `{name}`, not `champion-{class}`: it is not class `{class}`'s champion; point class `{class}` of {path} at its own champion file")]
    NotItsChampion {
        path: PathBuf,
        file: PathBuf,
        class: String,
        name: String,
    },
    #[error("{path}: class `{class}`: its figures were measured on genome {recorded}, but {file} holds genome {actual}; time it again (`evo bench --champions DIR --record`) or restore the genome that was measured")]
    StaleFigures {
        path: PathBuf,
        class: String,
        recorded: String,
        file: PathBuf,
        actual: String,
    },
    #[error("{path}: backward entry `{entry}`: field `{field}` {message}")]
    Backward {
        path: PathBuf,
        entry: String,
        field: String,
        message: String,
    },
    #[error("{path}: no class has head dim {head_dim}, so no champion can serve {problem}; evolve one (`evo evolve --problem ...`) and add it")]
    NoClass {
        path: PathBuf,
        head_dim: u32,
        problem: String,
    },
}

/// The champion a shape gets, and the reason, for `evo dispatch`.
#[derive(Debug, Clone)]
pub struct Choice<'a> {
    pub class: &'a ShapeClass,
    pub class_problem: Problem,
    /// One line: why this class.
    pub reason: String,
    /// Every class of the head dim with its distance, nearest first (for the report).
    pub considered: Vec<(&'a ShapeClass, f64)>,
}

fn work(p: &Problem) -> f64 {
    (p.batch as f64 * p.heads as f64 * p.q_len as f64 * p.kv_len as f64).log2()
}

impl ShapeClass {
    /// A class of `p` whose champion is `champion` (a file in the table's folder), found by
    /// the search in `experiment`, not benched yet: every figure empty.
    pub fn unbenched(p: &Problem, champion: String, experiment: String) -> ShapeClass {
        ShapeClass {
            name: ShapeClass::name_of(p),
            shape: p.spec(),
            champion,
            experiment,
            median_us: None,
            cudnn_us: None,
            speedup_vs_cudnn: None,
            cold_us: None,
            cudnn_cold_us: None,
            bench: None,
            genome_id: None,
            baselines: Vec::new(),
        }
    }

    /// The class's shape, parsed.
    pub fn problem(&self) -> Result<Problem, String> {
        self.shape.parse()
    }

    /// The class name of a shape: `b2-h16-l4096-d128-causal`, `b1-h8-lq77-lk1000-d64`,
    /// `b16-h32kv8-lq1-lk8192-d128-causal-br`, `b1-h32kv8-l8192-d128-causal-wl4096`.
    pub fn name_of(p: &Problem) -> String {
        let lengths = if p.q_len == p.kv_len {
            format!("l{}", p.q_len)
        } else {
            format!("lq{}-lk{}", p.q_len, p.kv_len)
        };
        let heads = match p.kv_heads.filter(|&k| k != p.heads) {
            Some(k) => format!("h{}kv{k}", p.heads),
            None => format!("h{}", p.heads),
        };
        let mut name = format!("b{}-{heads}-{lengths}-d{}", p.batch, p.head_dim.get());
        if p.causal {
            name.push_str("-causal");
        }
        if p.align == MaskAlign::BottomRight && p.masked() {
            name.push_str("-br");
        }
        if let Some(w) = p.window_left {
            name.push_str(&format!("-wl{w}"));
        }
        if let Some(w) = p.window_right {
            name.push_str(&format!("-wr{w}"));
        }
        name
    }
}

impl DispatchTable {
    /// Reads and checks a table: every shape parses, no class twice.
    pub fn load(path: &Path) -> Result<DispatchTable, DispatchError> {
        let text = std::fs::read_to_string(path).map_err(|error| GenomeError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let table: DispatchTable = from_toml(&text, path)?;
        table.check(path)?;
        Ok(table)
    }

    /// The TOML text, with a header of comment lines.
    pub fn to_toml_string(&self, header: &str) -> String {
        let mut text = String::new();
        for line in header.lines() {
            text.push_str("# ");
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&toml::to_string(self).expect("a table always serializes"));
        text
    }

    /// The class whose champion serves `problem` (see the module's rule). `path` only
    /// labels the error.
    pub fn choose(&self, problem: &Problem, path: &Path) -> Result<Choice<'_>, DispatchError> {
        let parsed: Vec<(&ShapeClass, Problem)> = self
            .classes
            .iter()
            .filter_map(|c| c.problem().ok().map(|p| (c, p)))
            .filter(|(_, p)| p.head_dim == problem.head_dim)
            .collect();
        if parsed.is_empty() {
            return Err(DispatchError::NoClass {
                path: path.to_path_buf(),
                head_dim: problem.head_dim.get(),
                problem: problem.label(),
            });
        }
        // The closest kind first: the same mask and grouping, else the same causality.
        let kind = |p: &Problem| {
            (
                p.causal,
                p.window_left.is_some() || p.window_right.is_some(),
                p.group() > 1,
            )
        };
        let same_kind = parsed.iter().any(|(_, p)| kind(p) == kind(problem));
        let same_mask = parsed.iter().any(|(_, p)| p.causal == problem.causal);
        let distance = |p: &Problem| (work(p) - work(problem)).abs();
        let key_gap =
            |p: &Problem| ((p.kv_len as f64).log2() - (problem.kv_len as f64).log2()).abs();
        let group_gap =
            |p: &Problem| ((p.group() as f64).log2() - (problem.group() as f64).log2()).abs();
        let mut considered: Vec<(&ShapeClass, Problem, f64)> = parsed
            .iter()
            .filter(|(_, p)| {
                if same_kind {
                    kind(p) == kind(problem)
                } else {
                    !same_mask || p.causal == problem.causal
                }
            })
            .map(|&(c, p)| (c, p, distance(&p)))
            .collect();
        // Stable: equal distances keep the table's order after the key-length and group
        // tie-breaks.
        considered.sort_by(|a, b| {
            a.2.total_cmp(&b.2)
                .then_with(|| key_gap(&a.1).total_cmp(&key_gap(&b.1)))
                .then_with(|| group_gap(&a.1).total_cmp(&group_gap(&b.1)))
        });
        let (class, class_problem, d) = considered[0];
        // The same shape, the dtype aside (a champion serves both).
        let exact = Problem {
            dtype: problem.dtype,
            ..class_problem
        } == *problem;
        let mask = if problem.causal {
            "causal"
        } else {
            "not causal"
        };
        let reason = if exact {
            format!(
                "exactly the class's shape{}",
                if class_problem.dtype == problem.dtype {
                    String::new()
                } else {
                    format!(
                        " (evolved at {}, built for {})",
                        class_problem.dtype, problem.dtype
                    )
                }
            )
        } else {
            format!(
                "nearest class of head dim {}{}: work B·H·Lq·Lk 2^{:.1} against the class's 2^{:.1} ({:.1} doublings apart)",
                problem.head_dim.get(),
                if same_mask {
                    format!(", {mask}")
                } else {
                    format!(", none is {mask}, so the mask is not matched")
                },
                work(problem),
                work(&class_problem),
                d
            )
        };
        Ok(Choice {
            class,
            class_problem,
            reason,
            considered: considered.iter().map(|&(c, _, d)| (c, d)).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn class(shape: &str) -> ShapeClass {
        let p: Problem = shape.parse().unwrap();
        let champion = format!("{}.toml", ShapeClass::name_of(&p));
        ShapeClass {
            shape: shape.into(),
            ..ShapeClass::unbenched(&p, champion, "experiments/x".into())
        }
    }

    pub(super) fn table() -> DispatchTable {
        DispatchTable {
            device: "NVIDIA H100 80GB HBM3".into(),
            classes: [
                "1,8,512,512,64,f16",
                "1,8,512,512,64,f16,causal",
                "4,16,1024,1024,64,f16",
                "4,16,1024,1024,64,f16,causal",
                "2,16,4096,4096,128,f16",
                "2,16,4096,4096,128,f16,causal",
                "1,16,8192,8192,128,f16",
            ]
            .into_iter()
            .map(class)
            .collect(),
            backward: Vec::new(),
        }
    }

    fn pick(spec: &str) -> String {
        pick_in(&table(), spec)
    }

    /// The class name `t` picks for `spec`.
    fn pick_in(t: &DispatchTable, spec: &str) -> String {
        let p: Problem = spec.parse().unwrap();
        t.choose(&p, Path::new("dispatch.toml"))
            .unwrap()
            .class
            .name
            .clone()
    }

    #[test]
    fn grouped_and_windowed_shapes_prefer_a_class_of_their_kind() {
        let mut t = table();
        t.classes.extend(
            [
                "16,32,1,8192,128,f16,causal=br,kv=8",
                "1,32,8192,8192,128,f16,causal,kv=8,window=4096:",
            ]
            .into_iter()
            .map(class),
        );
        assert_eq!(
            t.classes[7].name, "b16-h32kv8-lq1-lk8192-d128-causal-br",
            "the class name says the kind"
        );
        assert_eq!(t.classes[8].name, "b1-h32kv8-l8192-d128-causal-wl4096");
        let pick = |spec: &str| pick_in(&t, spec);
        // A grouped decode of another batch goes to the grouped decode class, not to the
        // causal D128 prefill nearer in work.
        assert_eq!(
            pick("4,32,1,16384,128,bf16,causal=br,kv=4"),
            "b16-h32kv8-lq1-lk8192-d128-causal-br"
        );
        assert_eq!(
            pick("1,16,4096,4096,128,f16,causal,kv=4,window=1024:"),
            "b1-h32kv8-l8192-d128-causal-wl4096"
        );
        // Without a class of its kind, the causality decides as before.
        assert_eq!(
            pick("1,16,4096,4096,128,f16,kv=16,window=64:64"),
            "b2-h16-l4096-d128"
        );
        // A multi-query decode class of the same work and keys: the group breaks the tie,
        // whichever class the table lists first.
        for mqa_first in [true, false] {
            let mut t = t.clone();
            let mqa = class("16,32,1,8192,128,f16,causal=br,kv=1");
            if mqa_first {
                t.classes.insert(0, mqa);
            } else {
                t.classes.push(mqa);
            }
            assert_eq!(
                pick_in(&t, "8,32,1,4096,128,bf16,causal=br,kv=8"),
                "b16-h32kv8-lq1-lk8192-d128-causal-br"
            );
            assert_eq!(
                pick_in(&t, "8,32,1,4096,128,bf16,causal=br,kv=2"),
                "b16-h32kv1-lq1-lk8192-d128-causal-br"
            );
        }
    }

    #[test]
    fn a_class_shape_gets_its_own_champion_in_either_dtype() {
        assert_eq!(pick("4,16,1024,1024,64,f16"), "b4-h16-l1024-d64");
        assert_eq!(
            pick("4,16,1024,1024,64,bf16,causal"),
            "b4-h16-l1024-d64-causal"
        );
        let t = table();
        let p: Problem = "1,16,8192,8192,128,bf16".parse().unwrap();
        let c = t.choose(&p, Path::new("d")).unwrap();
        assert!(c.reason.contains("exactly"), "{}", c.reason);
        assert!(c.reason.contains("bf16"), "{}", c.reason);
    }

    #[test]
    fn shapes_between_classes_go_to_the_nearest_of_their_head_dim_and_mask() {
        // 2^23 of work: between 2^21 (B1 H8 L512) and 2^26 (B4 H16 L1024).
        assert_eq!(pick("2,8,1024,1024,64,f16"), "b4-h16-l1024-d64");
        assert_eq!(pick("1,4,256,256,64,f16,causal"), "b1-h8-l512-d64-causal");
        // D128, causal, small: the only causal D128 class.
        assert_eq!(
            pick("1,1,128,128,128,bf16,causal"),
            "b2-h16-l4096-d128-causal"
        );
        // D128, not causal, longer than both: B1 H16 L8192 (2^30) is nearer than 2^29.
        assert_eq!(pick("1,16,16384,16384,128,f16"), "b1-h16-l8192-d128");
        // Between the two non-causal D128 classes (2^29, 2^30) at the same work as
        // B2 H16 L4096: that one.
        assert_eq!(pick("8,16,2048,2048,128,f16"), "b2-h16-l4096-d128");
    }

    #[test]
    fn the_reason_names_the_rule_and_a_missing_head_dim_is_an_error() {
        let mut t = table();
        let p: Problem = "2,8,1024,1024,64,f16".parse().unwrap();
        let c = t.choose(&p, Path::new("d")).unwrap();
        assert!(
            c.reason
                .contains("nearest class of head dim 64, not causal"),
            "{}",
            c.reason
        );
        assert_eq!(c.considered.len(), 2);
        t.classes.retain(|c| !c.shape.contains(",128,"));
        let p: Problem = "1,8,512,512,128,f16".parse().unwrap();
        let e = t
            .choose(&p, Path::new("genomes/champions/h100/dispatch.toml"))
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("dispatch.toml") && msg.contains("head dim 128"),
            "{msg}"
        );
        // Without a class of the same mask, the nearest of the other mask, said so.
        let mut t = table();
        t.classes.retain(|c| !c.shape.ends_with("causal"));
        let p: Problem = "1,8,512,512,64,f16,causal".parse().unwrap();
        let c = t.choose(&p, Path::new("d")).unwrap();
        assert!(c.reason.contains("mask is not matched"), "{}", c.reason);
    }

    #[test]
    fn tables_round_trip_and_bad_ones_name_file_class_and_field() {
        let mut t = table();
        // Every field, the baselines' array of tables included, comes back.
        t.classes[0].median_us = Some(6.44);
        t.classes[0].genome_id = Some("3614c1b7608d779e".into());
        t.classes[0].baselines = vec![BaselineFigure {
            backend: "sdpa-cudnn".into(),
            us: Some(9.79),
            cold_us: Some(11.07),
        }];
        let dir = std::env::temp_dir().join(format!("evo-dispatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(DISPATCH_FILE);
        std::fs::write(&path, t.to_toml_string("champions of a test")).unwrap();
        assert_eq!(DispatchTable::load(&path).unwrap(), t);
        let bad = t
            .to_toml_string("")
            .replace("\"2,16,4096,4096,128,f16\"", "\"2,16,4096,4096,80,f16\"");
        std::fs::write(&path, bad).unwrap();
        let msg = DispatchTable::load(&path).unwrap_err().to_string();
        assert!(
            msg.contains("dispatch.toml")
                && msg.contains("b2-h16-l4096-d128")
                && msg.contains("B,H,Lq,Lk,D"),
            "{msg}"
        );
        let typo = t.to_toml_string("").replace("champion =", "champoin =");
        std::fs::write(&path, typo).unwrap();
        let msg = DispatchTable::load(&path).unwrap_err().to_string();
        assert!(
            msg.contains("dispatch.toml:") && msg.contains("champoin"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
