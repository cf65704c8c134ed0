//! An export folder (`evo export OUT`): the champions of one device, compiled, with the
//! table that dispatches them and a manifest of where each came from.
//!
//! ```text
//! OUT/manifest.json            what is here: champions, kernels, versions (this module)
//! OUT/dispatch.toml            the champions' table (crates/genome/src/dispatch.rs)
//! OUT/kernels/CLASS.DTYPE.ptx  each champion per dtype (+ .cubin with --cubin)
//! OUT/kernels/CLASS.DTYPE.lse.ptx  its lse twin (likewise), for the calls that ask
//!                              for the forward's log-sum-exp
//! OUT/kernels/bwd-dD.DTYPE.ptx the backward genome of head dim D per dtype (likewise)
//! OUT/include/evo.h            the C ABI
//! OUT/lib/libevo_runtime.so    the C ABI's implementation (this crate as a cdylib)
//! OUT/python/evo_attention/    `sdpa(q, k, v, is_causal=False)` for PyTorch
//! ```
//!
//! The manifest's types are both what `evo export` writes and what the runtime reads,
//! so the two cannot drift apart; the Python module reads the same JSON.

use crate::error::RuntimeError;
use crate::module::ModuleImage;
use evo_genome::dispatch::DispatchTable;
use evo_genome::{Dtype, Problem};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The Python module an export carries, as (path under `OUT/python/`, text).
pub const PYTHON_MODULE: [(&str, &str); 4] = [
    (
        "evo_attention/__init__.py",
        include_str!("../python/evo_attention/__init__.py"),
    ),
    (
        "evo_attention/dispatch.py",
        include_str!("../python/evo_attention/dispatch.py"),
    ),
    (
        "evo_attention/_lib.py",
        include_str!("../python/evo_attention/_lib.py"),
    ),
    (
        "evo_attention/_autograd.py",
        include_str!("../python/evo_attention/_autograd.py"),
    ),
];

/// The manifest's file name in an export folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest format this runtime reads; a later change that old readers cannot
/// follow raises it.
pub const MANIFEST_FORMAT: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The evo that wrote the export (its Cargo version).
    pub evo_version: String,
    /// The NVRTC that compiled the kernels, `major.minor`.
    pub nvrtc_version: String,
    /// The GPU the champions were evolved and measured on, as the driver names it.
    pub device: String,
    /// The architecture the kernels are built for (`sm_90a`, `sm_90`, `sm_89`): the
    /// most specific of its kernels'.
    pub arch: String,
    /// The dispatch table, relative to the export.
    pub dispatch: String,
    /// The shared library of the C ABI, relative to the export, when it was copied in.
    #[serde(default)]
    pub library: Option<String>,
    pub champions: Vec<ChampionEntry>,
    /// GREEN's tolerances per dtype (crates/gates/src/tolerance.rs): what a check of an
    /// exported kernel's output against an fp32 reference holds it to.
    #[serde(default)]
    pub tolerances: Vec<ToleranceEntry>,
    /// The backward kernels, one entry per `[[backward]]` entry of the table; none in
    /// an export of a table without them (or written before them).
    #[serde(default)]
    pub backward: Vec<BackwardChampionEntry>,
}

/// One backward genome of the table and its kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackwardChampionEntry {
    pub head_dim: u32,
    /// The dtype it serves; absent: both.
    #[serde(default)]
    pub dtype: Option<Dtype>,
    /// The genome file (relative to the champions folder), name and id.
    pub genome_file: String,
    pub genome: String,
    pub genome_id: String,
    /// `ampere_bwd`: the template it is built from.
    pub family: String,
    /// Where the genome comes from (the table's `origin`: a search, or why none ran).
    pub origin: String,
    pub kernels: Vec<KernelEntry>,
}

impl BackwardChampionEntry {
    /// The file names of a head dim's backward kernel in a dtype (without the folder).
    pub fn file_stem(head_dim: u32, dtype: Dtype) -> String {
        format!("bwd-d{head_dim}.{dtype}")
    }

    /// Whether it serves head dim `d` in `dtype`.
    pub fn serves(&self, d: u32, dtype: Dtype) -> bool {
        self.head_dim == d && self.dtype.is_none_or(|x| x == dtype)
    }
}

/// GREEN's bound on the error of one dtype's output against an fp32 reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToleranceEntry {
    pub dtype: Dtype,
    /// ‖O − ref‖_F / ‖ref‖_F over a launch.
    pub rel_frob: f64,
    /// The largest |O − ref| of any element.
    pub max_abs: f64,
}

/// One shape class's champion and its kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChampionEntry {
    /// The class (`b2-h16-l4096-d128-causal`), as in the dispatch table.
    pub class: String,
    /// `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]`: the shape the champion was evolved for.
    pub shape: String,
    pub batch: u32,
    pub heads: u32,
    pub q_len: u32,
    pub kv_len: u32,
    pub head_dim: u32,
    pub causal: bool,
    /// The genome's name and id (the id names its genes: same id, same kernel).
    pub genome: String,
    pub genome_id: String,
    /// `ampere` or `hopper`: which template it is built from.
    pub family: String,
    /// The champion's median µs on its shape, and PyTorch SDPA's cuDNN backend in the
    /// same run, in `measured_dtype` (from the dispatch table; absent if never benched).
    pub median_us: Option<f64>,
    pub cudnn_us: Option<f64>,
    pub measured_dtype: Option<String>,
    /// The bench record and the search those figures and the genome come from.
    pub bench: Option<String>,
    pub experiment: String,
    /// The plain kernels, one per dtype: what `evo_attention_forward` runs.
    pub kernels: Vec<KernelEntry>,
    /// The lse twins (the same genome built with `EVO_LSE` = 1, kernels/ABI.md "The
    /// log-sum-exp output"), one per dtype: what a call that asks for the forward's
    /// log-sum-exp runs. None in an export written before them: such calls are then
    /// [`RuntimeError::Unsupported`].
    #[serde(default)]
    pub lse_kernels: Vec<KernelEntry>,
}

/// One compiled kernel of a champion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelEntry {
    pub dtype: Dtype,
    /// `sm_90a` (runs on compute capability 9.0 only), or `sm_90` / `sm_89`.
    pub arch: String,
    /// Paths relative to the export; PTX is always there, a CUBIN when exported with one.
    pub ptx: String,
    #[serde(default)]
    pub cubin: Option<String>,
}

impl KernelEntry {
    /// The file names of a class's kernel in a dtype (without the folder).
    pub fn file_stem(class: &str, dtype: Dtype) -> String {
        format!("{class}.{dtype}")
    }

    /// The file names of a class's lse twin in a dtype (without the folder).
    pub fn lse_file_stem(class: &str, dtype: Dtype) -> String {
        format!("{class}.{dtype}.lse")
    }
}

/// Whether code for `arch` runs on a GPU of compute capability `cc`: an arch-specific
/// build (`sm_90a`) only on its own; a CUBIN on its major version from its minor up; PTX
/// on its own and every later one (the driver compiles it).
pub fn arch_runs_on(arch: &str, cc: (i32, i32), cubin: bool) -> bool {
    let digits = arch.trim_start_matches("sm_");
    let specific = digits.ends_with('a');
    let Ok(n) = digits.trim_end_matches('a').parse::<i32>() else {
        return false;
    };
    let (major, minor) = (n / 10, n % 10);
    if specific {
        cc == (major, minor)
    } else if cubin {
        cc.0 == major && cc.1 >= minor
    } else {
        cc >= (major, minor)
    }
}

/// Whether `rel` names a file inside the export: relative, without `..` or `.`.
fn inside(rel: &str) -> bool {
    !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// An export folder, read and checked.
#[derive(Debug, Clone)]
pub struct Export {
    dir: PathBuf,
    manifest: Manifest,
    table: DispatchTable,
}

impl Export {
    /// Reads `dir/manifest.json` and the dispatch table it names, and checks that every
    /// class of the table has a champion entry with a kernel file per dtype.
    pub fn open(dir: &Path) -> Result<Export, RuntimeError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            RuntimeError::export(
                &path,
                format!("cannot read it ({e}); is this a folder written by `evo export`?"),
            )
        })?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| RuntimeError::export(&path, format!("not a manifest: {e}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(RuntimeError::export(
                &path,
                format!(
                    "format {} is not the format {MANIFEST_FORMAT} this runtime reads; \
                     use the runtime library of the export (lib/) or export again",
                    manifest.format
                ),
            ));
        }
        // Every path the manifest names stays inside the export: a manifest that points
        // elsewhere would have the runtime load a kernel or library evo did not write.
        let named = std::iter::once(("dispatch", manifest.dispatch.as_str()))
            .chain(manifest.library.iter().map(|l| ("library", l.as_str())))
            .chain(
                manifest
                    .champions
                    .iter()
                    .flat_map(|c| c.kernels.iter().chain(&c.lse_kernels))
                    .chain(manifest.backward.iter().flat_map(|b| b.kernels.iter()))
                    .flat_map(|k| {
                        std::iter::once(("ptx", k.ptx.as_str()))
                            .chain(k.cubin.iter().map(|c| ("cubin", c.as_str())))
                    }),
            );
        for (field, rel) in named {
            if !inside(rel) {
                return Err(RuntimeError::export(
                    &path,
                    format!(
                        "field `{field}` is `{rel}`, which is not a path inside the export; \
                         export again"
                    ),
                ));
            }
        }
        let table_path = dir.join(&manifest.dispatch);
        let table = DispatchTable::load(&table_path)
            .map_err(|e| RuntimeError::export(&table_path, e.to_string()))?;
        for class in &table.classes {
            let entry = manifest
                .champions
                .iter()
                .find(|c| c.class == class.name)
                .ok_or_else(|| {
                    RuntimeError::export(
                        &path,
                        format!(
                            "class `{}` of {} has no champion entry; export again",
                            class.name, manifest.dispatch
                        ),
                    )
                })?;
            for (k, what) in entry
                .kernels
                .iter()
                .map(|k| (k, "kernel"))
                .chain(entry.lse_kernels.iter().map(|k| (k, "lse twin")))
            {
                if !dir.join(&k.ptx).is_file() {
                    return Err(RuntimeError::export(
                        dir.join(&k.ptx),
                        format!("the {} {what} of `{}` is missing", k.dtype, class.name),
                    ));
                }
            }
        }
        for b in &manifest.backward {
            for k in &b.kernels {
                if !dir.join(&k.ptx).is_file() {
                    return Err(RuntimeError::export(
                        dir.join(&k.ptx),
                        format!(
                            "the {} backward kernel of head dim {} is missing",
                            k.dtype, b.head_dim
                        ),
                    ));
                }
            }
        }
        Ok(Export {
            dir: dir.to_path_buf(),
            manifest,
            table,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn table(&self) -> &DispatchTable {
        &self.table
    }

    /// The champion and kernel that serve `p` by the table's rule, or
    /// [`RuntimeError::Unsupported`] when no class has its head dim or no kernel its dtype.
    pub fn choose(&self, p: &Problem) -> Result<(&ChampionEntry, &KernelEntry), RuntimeError> {
        self.choose_build(p, false)
    }

    /// [`Self::choose`] for a call that asks for the forward's log-sum-exp: the same
    /// champion's lse twin, or [`RuntimeError::Unsupported`] for an export written before
    /// the twins (its manifest names none).
    pub fn choose_lse(&self, p: &Problem) -> Result<(&ChampionEntry, &KernelEntry), RuntimeError> {
        self.choose_build(p, true)
    }

    fn choose_build(
        &self,
        p: &Problem,
        lse: bool,
    ) -> Result<(&ChampionEntry, &KernelEntry), RuntimeError> {
        let table_path = self.dir.join(&self.manifest.dispatch);
        let choice = self
            .table
            .choose(p, &table_path)
            .map_err(|e| RuntimeError::Unsupported(e.to_string()))?;
        let entry = self
            .manifest
            .champions
            .iter()
            .find(|c| c.class == choice.class.name)
            .ok_or_else(|| {
                RuntimeError::export(
                    self.dir.join(MANIFEST_FILE),
                    format!("no champion entry for class `{}`", choice.class.name),
                )
            })?;
        if lse && entry.lse_kernels.is_empty() {
            return Err(RuntimeError::Unsupported(format!(
                "champion `{}` has no lse twin in {}: the export was written before the \
                 forward's log-sum-exp became a kernel of its own (kernels/ABI.md, \"The \
                 log-sum-exp output\"); export the champions again with this evo to ask \
                 for the lse (evo_attention_forward_lse, the autograd path)",
                entry.class,
                self.dir.join(MANIFEST_FILE).display()
            )));
        }
        let kernels = if lse {
            &entry.lse_kernels
        } else {
            &entry.kernels
        };
        let kernel = kernels.iter().find(|k| k.dtype == p.dtype).ok_or_else(|| {
            RuntimeError::Unsupported(format!(
                "champion `{}` was not exported for {}{}",
                entry.class,
                p.dtype,
                if lse { " with the lse" } else { "" }
            ))
        })?;
        Ok((entry, kernel))
    }

    /// The backward genome and kernel that serve `p` (by head dim and dtype), or
    /// [`RuntimeError::Unsupported`] saying the export has none for them.
    pub fn choose_backward(
        &self,
        p: &Problem,
    ) -> Result<(&BackwardChampionEntry, &KernelEntry), RuntimeError> {
        let d = p.head_dim.get();
        let entry = self
            .manifest
            .backward
            .iter()
            .find(|b| b.serves(d, p.dtype))
            .ok_or_else(|| {
                let have: Vec<String> = self
                    .manifest
                    .backward
                    .iter()
                    .map(|b| match b.dtype {
                        Some(t) => format!("D{} {t}", b.head_dim),
                        None => format!("D{}", b.head_dim),
                    })
                    .collect();
                RuntimeError::Unsupported(format!(
                    "this export has no backward kernel for head dim {d} in {} (it has {}); \
                     a table's [[backward]] entries name them (`evo export` compiles them)",
                    p.dtype,
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                ))
            })?;
        let kernel = entry
            .kernels
            .iter()
            .find(|k| k.dtype == p.dtype)
            .ok_or_else(|| {
                RuntimeError::Unsupported(format!(
                    "the backward of head dim {d} was not exported for {}",
                    p.dtype
                ))
            })?;
        Ok((entry, kernel))
    }

    /// The module image of `kernel` for a GPU of compute capability `cc`: its CUBIN when
    /// there is one that runs there, else its PTX; an error naming both archs when
    /// neither can.
    pub fn image(&self, kernel: &KernelEntry, cc: (i32, i32)) -> Result<ModuleImage, RuntimeError> {
        let read = |rel: &str| {
            let path = self.dir.join(rel);
            std::fs::read(&path)
                .map_err(|e| RuntimeError::export(&path, format!("cannot read it: {e}")))
        };
        if let Some(cubin) = &kernel.cubin {
            if arch_runs_on(&kernel.arch, cc, true) {
                return Ok(ModuleImage::Cubin(read(cubin)?));
            }
        }
        if !arch_runs_on(&kernel.arch, cc, false) {
            return Err(RuntimeError::Abi(format!(
                "{} is built for {} ({}); this GPU is compute capability {}.{}: export \
                 champions evolved for it (`evo export --arch sm_{}{}`)",
                kernel.ptx, kernel.arch, self.manifest.device, cc.0, cc.1, cc.0, cc.1
            )));
        }
        let bytes = read(&kernel.ptx)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| RuntimeError::export(self.dir.join(&kernel.ptx), "is not PTX text"))?;
        Ok(ModuleImage::Ptx(text))
    }
}

/// The arguments of the Python module's `choose(b, h, lq, lk, d, causal, kv_heads, windowed)`
/// for `p`, as JSON: how the tests hand a Rust problem to the Python dispatcher, which
/// must pick what [`Export::choose`] picks.
#[doc(hidden)]
pub fn python_choose_args(p: &Problem) -> serde_json::Value {
    serde_json::json!([
        p.batch,
        p.heads,
        p.q_len,
        p.kv_len,
        p.head_dim.get(),
        p.causal,
        p.kv_heads.unwrap_or(p.heads),
        p.window_left.is_some() || p.window_right.is_some(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_specific_code_runs_only_on_its_own_gpu() {
        assert!(arch_runs_on("sm_90a", (9, 0), true));
        assert!(arch_runs_on("sm_90a", (9, 0), false));
        assert!(!arch_runs_on("sm_90a", (10, 0), false));
        assert!(!arch_runs_on("sm_90a", (8, 9), true));
        assert!(arch_runs_on("sm_89", (8, 9), true));
        assert!(!arch_runs_on("sm_89", (9, 0), true));
        assert!(arch_runs_on("sm_89", (9, 0), false));
        assert!(!arch_runs_on("sm_90", (8, 9), false));
        assert!(!arch_runs_on("compute_90", (9, 0), false));
    }

    #[test]
    fn a_missing_or_foreign_folder_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let e = Export::open(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("manifest.json") && e.contains("evo export"),
            "{e}"
        );
        std::fs::write(dir.path().join(MANIFEST_FILE), "{\"format\": 7}").unwrap();
        let e = Export::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a manifest"), "{e}");
    }

    #[test]
    fn a_manifest_naming_a_file_outside_the_export_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (dispatch, library) in [
            ("../dispatch.toml", "null"),
            ("/etc/dispatch.toml", "null"),
            ("dispatch.toml", "\"../../lib/libevil.so\""),
        ] {
            let manifest = format!(
                "{{\"format\": {MANIFEST_FORMAT}, \"evo_version\": \"0\", \"nvrtc_version\": \"13.0\", \
                 \"device\": \"H100\", \"arch\": \"sm_90a\", \"dispatch\": \"{dispatch}\", \
                 \"library\": {library}, \"champions\": []}}"
            );
            std::fs::write(dir.path().join(MANIFEST_FILE), manifest).unwrap();
            let e = Export::open(dir.path()).unwrap_err().to_string();
            assert!(
                e.contains("manifest.json") && e.contains("not a path inside the export"),
                "{dispatch} {library}: {e}"
            );
        }
    }
}
