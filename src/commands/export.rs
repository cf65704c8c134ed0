//! `evo export OUT --champions DIR`: a champions folder as a package users can call
//! without evo: each champion compiled per dtype (PTX always, a CUBIN with `--cubin`),
//! twice: the plain kernels and the lse twins (`EVO_LSE` = 1) that the calls asking for
//! the forward's log-sum-exp run (kernels/ABI.md, "The log-sum-exp output"),
//! and the backward genome of each head dim the table's `[[backward]]` entries name,
//! the dispatch table, `manifest.json`, the C header, the runtime's shared library when
//! it has been built, and the Python module (the layout is in
//! crates/runtime/src/export.rs, whose types are the manifest's).
//!
//! Compiling needs NVRTC but no GPU, so CI exports the recorded champions.

use anyhow::{bail, Context};
use evo_codegen::{compile_builds, Build, Toolchain};
use evo_gates::Tolerance;
use evo_genome::dispatch::DISPATCH_FILE;
use evo_genome::{Dtype, Family, Target};
use evo_runtime::export::{
    BackwardChampionEntry, ChampionEntry, KernelEntry, Manifest, ToleranceEntry, MANIFEST_FILE,
    MANIFEST_FORMAT, PYTHON_MODULE,
};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The folder to write: created if missing; an earlier export there is replaced
    /// whole (no kernel of it stays); any other non-empty folder is refused without
    /// --force.
    pub out: PathBuf,
    /// Replace OUT even when it holds files that no export wrote.
    #[arg(long)]
    pub force: bool,
    /// The champions folder (its dispatch.toml and champion genomes).
    #[arg(long, value_name = "DIR", default_value = super::champions::DEFAULT_CHAMPIONS)]
    pub champions: PathBuf,
    /// The GPU architecture to build for: sm_90a or sm_90 (H100, H200; Hopper-family
    /// champions are always sm_90a), sm_89 (L4 and other Ada parts).
    #[arg(long, default_value = "sm_90a")]
    pub arch: String,
    /// Also write each kernel's CUBIN: machine code for the architecture, loaded without
    /// the driver's JIT, the very code the bench timed (PTX alone is compiled by the
    /// driver's own ptxas at first use).
    #[arg(long)]
    pub cubin: bool,
    /// The runtime's shared library to copy into OUT/lib (`cargo build --release -p
    /// evo-runtime` builds it); default: libevo_runtime next to this evo binary.
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
}

/// The runtime library's file name on this platform (`libevo_runtime.so` on Linux).
fn library_name() -> String {
    format!(
        "{}evo_runtime{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// Where cargo puts the runtime library of the build this binary belongs to: beside it
/// when `-p evo-runtime` was built, in `deps/` when it was built as a dependency; the
/// newer of the two (the other may be left from an older build).
fn default_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join(library_name()),
        dir.join("deps").join(library_name()),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max()
    .map(|(_, p)| p)
}

/// The dtype a bench record's figures are in: its label ends with `(DEVICE, DTYPE)`.
fn measured_dtype(bench: &str) -> Option<String> {
    let (_, last) = bench.trim_end_matches(')').rsplit_once(", ")?;
    ["f16", "bf16"].contains(&last).then(|| last.to_string())
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("{}: cannot write", path.display()))
}

/// The export is written into a temporary sibling of OUT and swapped in whole at the
/// end: a reader of OUT sees the old package or the new one, and no file of the old one
/// (a kernel of a class since removed) stays beside the new. Dropped before
/// [`Staging::commit`], it removes the temporary folder.
struct Staging {
    dir: PathBuf,
    out: PathBuf,
    committed: bool,
}

impl Staging {
    /// Checks OUT before anything is compiled: a folder that is missing, empty or an
    /// earlier export (its manifest reads as one); any other is refused unless `force`,
    /// naming what is there. OUT must not hold the champions it exports.
    fn prepare(out: &Path, champions: &Path, force: bool) -> anyhow::Result<Staging> {
        let shown = out.display();
        let name = out
            .file_name()
            .filter(|_| !out.ends_with(".."))
            .with_context(|| {
                format!(
                    "{shown}: name the export's folder by its name, e.g. out/h100 (an export \
                     replaces its folder whole, so not `.`, `..` or `/`)"
                )
            })?
            .to_string_lossy()
            .into_owned();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("{}: cannot create the folder", parent.display()))?;
        let parent = parent
            .canonicalize()
            .with_context(|| format!("{}: cannot resolve", parent.display()))?;
        let out_abs = parent.join(&name);
        if let Ok(meta) = std::fs::symlink_metadata(&out_abs) {
            if !meta.is_dir() {
                bail!(
                    "{shown}: exists and is not a folder (a file or a link); name a folder for the export"
                );
            }
            if let Ok(champions) = champions.canonicalize() {
                if champions.starts_with(&out_abs) {
                    bail!(
                        "{shown}: holds the champions being exported ({}); export into another folder",
                        champions.display()
                    );
                }
            }
            let mut entries: Vec<String> = std::fs::read_dir(&out_abs)
                .with_context(|| format!("{shown}: cannot read"))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            entries.sort();
            let manifest = out_abs.join(MANIFEST_FILE);
            let an_export = std::fs::read_to_string(&manifest)
                .ok()
                .is_some_and(|t| serde_json::from_str::<Manifest>(&t).is_ok());
            if !entries.is_empty() && !an_export && !force {
                let shown_entries = entries
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = entries.len().saturating_sub(5);
                bail!(
                    "{shown}: not empty and not an export (no {MANIFEST_FILE} written by `evo export`): \
                     it holds {shown_entries}{}; export into another folder, or pass --force to replace it whole",
                    if more > 0 { format!(" and {more} more") } else { String::new() }
                );
            }
        }
        let dir = parent.join(format!(".{name}.export-{}.tmp", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| {
                format!("{}: cannot remove a stale temporary folder", dir.display())
            })?;
        }
        std::fs::create_dir(&dir).with_context(|| {
            format!(
                "{}: cannot create (is {} writable?)",
                dir.display(),
                parent.display()
            )
        })?;
        Ok(Staging {
            dir,
            out: out_abs,
            committed: false,
        })
    }

    /// Puts the written package in OUT's place; the old one (if any) is removed after.
    fn commit(mut self) -> anyhow::Result<()> {
        let old = self.out.with_file_name(format!(
            ".{}.old-{}.tmp",
            self.out.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let had_old = self.out.exists();
        if had_old {
            std::fs::rename(&self.out, &old).with_context(|| {
                format!("{}: cannot move aside to replace it", self.out.display())
            })?;
        }
        if let Err(e) = std::fs::rename(&self.dir, &self.out) {
            if had_old {
                let _ = std::fs::rename(&old, &self.out);
            }
            return Err(e).with_context(|| {
                format!("{}: cannot put the export in place", self.out.display())
            });
        }
        self.committed = true;
        if had_old {
            std::fs::remove_dir_all(&old).with_context(|| {
                format!(
                    "{}: the export is in place, but its old copy is left here",
                    old.display()
                )
            })?;
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let target = Target::parse(args.arch.trim_end_matches('a')).with_context(|| {
        format!(
            "--arch {}: evo builds for sm_90a, sm_90 and sm_89",
            args.arch
        )
    })?;
    // The destination first: a refusal costs nothing, and a folder that cannot be
    // written is found before any kernel is compiled.
    let staging = Staging::prepare(&args.out, &args.champions, args.force)?;
    let table_path = args.champions.join(DISPATCH_FILE);
    let (table, files) = super::champions::load_table(&args.champions)?;
    let mut genomes = Vec::new();
    for (class, file) in table.classes.iter().zip(files) {
        let path = args.champions.join(&class.champion);
        let p = class.problem().map_err(anyhow::Error::msg)?;
        let violations = file.genes.violations(p.head_dim, target);
        if !violations.is_empty() {
            bail!(
                "{}: champion of `{}` cannot be built for {}: {}; export for the GPU it \
                 was evolved on (--arch)",
                path.display(),
                class.name,
                args.arch,
                violations
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        genomes.push((class, p, file));
    }
    let backward_files = table.load_backward(&args.champions, &table_path)?;
    let mut backward = Vec::new();
    for (entry, file) in table.backward.iter().zip(backward_files) {
        let head_dim = evo_genome::HeadDim::try_from(entry.head_dim)
            .map_err(|e| anyhow::anyhow!("{}: {e}", table_path.display()))?;
        let violations = file.genes.violations(head_dim, target);
        if !violations.is_empty() {
            bail!(
                "{}: the backward genome of D{} cannot be built for {}: {}",
                args.champions.join(&entry.genome).display(),
                entry.head_dim,
                args.arch,
                violations
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        let dtypes: Vec<Dtype> = entry.serves().into_iter().map(|(_, d)| d).collect();
        backward.push((entry, head_dim, file, dtypes));
    }
    let lib_source = args.lib.clone().or_else(default_library);
    if let Some(path) = lib_source.as_ref().filter(|p| !p.is_file()) {
        bail!(
            "--lib {}: no such file (build it with `cargo build --release -p evo-runtime`)",
            path.display()
        );
    }
    let tc = Toolchain::discover()?;
    // Per champion and dtype: the plain kernel, then its lse twin.
    let jobs: Vec<_> = genomes
        .iter()
        .flat_map(|(_, p, file)| {
            Dtype::ALL.into_iter().flat_map(move |d| {
                [Build::Plain, Build::LseTwin].map(|b| (file.genes, p.head_dim, d, target, b))
            })
        })
        .chain(backward.iter().flat_map(|(_, head_dim, file, dtypes)| {
            dtypes
                .iter()
                .map(|&d| (file.genes, *head_dim, d, target, Build::Plain))
        }))
        .collect();
    let start = std::time::Instant::now();
    let mut compiled = compile_builds(&tc, &jobs).into_iter();
    eprintln!(
        "compiled {} kernels ({} champions x f16, bf16 x plain, lse twin; {} backward) for {} in {:.1} s with NVRTC {}.{}",
        jobs.len(),
        genomes.len(),
        backward.len(),
        args.arch,
        start.elapsed().as_secs_f64(),
        tc.nvrtc_version.0,
        tc.nvrtc_version.1
    );

    let out = &staging.dir;
    let mut champions = Vec::new();
    for (class, p, file) in &genomes {
        let arch = match file.genes.family {
            Family::Hopper | Family::HopperBwd => format!("{}a", target.arch()),
            Family::Ampere | Family::AmpereBwd => target.arch().to_string(),
        };
        let (mut kernels, mut lse_kernels) = (Vec::new(), Vec::new());
        for dtype in Dtype::ALL {
            for (label, stem, into) in [
                ("", KernelEntry::file_stem(&class.name, dtype), &mut kernels),
                (
                    ", lse twin",
                    KernelEntry::lse_file_stem(&class.name, dtype),
                    &mut lse_kernels,
                ),
            ] {
                let c = compiled
                    .next()
                    .expect("one result per job")
                    .with_context(|| format!("champion `{}` ({dtype}{label})", class.name))?;
                let stem = format!("kernels/{stem}");
                let ptx = format!("{stem}.ptx");
                write(&out.join(&ptx), &c.ptx)?;
                let cubin = if args.cubin {
                    let path = format!("{stem}.cubin");
                    write(&out.join(&path), &c.cubin)?;
                    Some(path)
                } else {
                    None
                };
                into.push(KernelEntry {
                    dtype,
                    arch: arch.clone(),
                    ptx,
                    cubin,
                });
            }
        }
        champions.push(ChampionEntry {
            class: class.name.clone(),
            shape: class.shape.clone(),
            batch: p.batch,
            heads: p.heads,
            q_len: p.q_len,
            kv_len: p.kv_len,
            head_dim: p.head_dim.get(),
            causal: p.causal,
            genome: file.name.clone(),
            genome_id: file.genes.id().to_string(),
            family: file.genes.family.label().to_string(),
            median_us: class.median_us,
            cudnn_us: class.cudnn_us,
            measured_dtype: class.bench.as_deref().and_then(measured_dtype),
            bench: class.bench.clone(),
            experiment: class.experiment.clone(),
            kernels,
            lse_kernels,
        });
    }
    let mut backward_entries = Vec::new();
    for (entry, head_dim, file, dtypes) in &backward {
        let mut kernels = Vec::new();
        for &dtype in dtypes {
            let c = compiled
                .next()
                .expect("one result per job")
                .with_context(|| format!("the backward of D{head_dim} ({dtype})"))?;
            let stem = format!(
                "kernels/{}",
                BackwardChampionEntry::file_stem(head_dim.get(), dtype)
            );
            let ptx = format!("{stem}.ptx");
            write(&out.join(&ptx), &c.ptx)?;
            let cubin = if args.cubin {
                let path = format!("{stem}.cubin");
                write(&out.join(&path), &c.cubin)?;
                Some(path)
            } else {
                None
            };
            kernels.push(KernelEntry {
                dtype,
                // The Hopper backward is sm_90a code, as the Hopper forward.
                arch: match file.genes.family {
                    Family::Hopper | Family::HopperBwd => format!("{}a", target.arch()),
                    Family::Ampere | Family::AmpereBwd => target.arch().to_string(),
                },
                ptx,
                cubin,
            });
        }
        backward_entries.push(BackwardChampionEntry {
            head_dim: head_dim.get(),
            dtype: entry.dtype,
            genome_file: entry.genome.clone(),
            genome: file.name.clone(),
            genome_id: file.genes.id().to_string(),
            family: file.genes.family.label().to_string(),
            origin: entry.origin.clone(),
            kernels,
        });
    }
    let arch = if champions
        .iter()
        .any(|c| c.kernels.iter().any(|k| k.arch.ends_with('a')))
        || backward_entries
            .iter()
            .any(|b| b.kernels.iter().any(|k| k.arch.ends_with('a')))
    {
        format!("{}a", target.arch())
    } else {
        target.arch().to_string()
    };

    let library = match &lib_source {
        Some(path) => {
            let rel = format!("lib/{}", library_name());
            let bytes =
                std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
            write(&out.join(&rel), bytes)?;
            eprintln!(
                "runtime library: {} -> {}",
                path.display(),
                args.out.join(&rel).display()
            );
            Some(rel)
        }
        None => {
            eprintln!(
                "runtime library: not found next to this evo binary, none copied: the C ABI \
                 and the Python module need it; build it with `cargo build --release -p \
                 evo-runtime` and export again (or pass --lib PATH)"
            );
            None
        }
    };

    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        evo_version: env!("CARGO_PKG_VERSION").to_string(),
        nvrtc_version: format!("{}.{}", tc.nvrtc_version.0, tc.nvrtc_version.1),
        device: table.device.clone(),
        arch,
        dispatch: DISPATCH_FILE.to_string(),
        library,
        champions,
        tolerances: Dtype::ALL
            .map(|dtype| {
                let t = Tolerance::for_dtype(dtype);
                ToleranceEntry {
                    dtype,
                    rel_frob: t.rel_frob,
                    max_abs: t.max_abs,
                }
            })
            .to_vec(),
        backward: backward_entries,
    };
    let table_text = std::fs::read_to_string(&table_path)
        .with_context(|| format!("{}: cannot read", table_path.display()))?;
    write(&out.join(DISPATCH_FILE), table_text)?;
    write(
        &out.join(MANIFEST_FILE),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    write(&out.join("include/evo.h"), evo_runtime::capi::HEADER)?;
    for (rel, text) in PYTHON_MODULE {
        write(&out.join("python").join(rel), text)?;
    }
    staging.commit()?;
    let out = &args.out;
    println!(
        "exported {} champions and {} backward of {} ({} kernels, {}) to {}",
        manifest.champions.len(),
        manifest.backward.len(),
        manifest.device,
        jobs.len(),
        if args.cubin { "PTX and CUBIN" } else { "PTX" },
        out.display()
    );
    println!(
        "  python: sys.path.insert(0, \"{}\"); import evo_attention; evo_attention.sdpa(q, k, v)",
        out.join("python").display()
    );
    println!(
        "  C: #include \"evo.h\", -I{} -L{} -levo_runtime, evo_init(\"{}\")",
        out.join("include").display(),
        out.join("lib").display(),
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_dtype_is_the_last_word_of_the_bench_label() {
        assert_eq!(
            measured_dtype("experiments/x/bench_f16.json (NVIDIA H100 80GB HBM3, f16)"),
            Some("f16".into())
        );
        assert_eq!(measured_dtype("b.json (H100, bf16)"), Some("bf16".into()));
        assert_eq!(measured_dtype("an unrecorded bench run (no --json)"), None);
    }
}
