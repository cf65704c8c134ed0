//! The on-disk CUBIN cache: a compiled variant kept under a key of everything its
//! machine code depends on (the templates' hash, the genome's macro definitions, the
//! architecture with the other NVRTC options, and NVRTC's version), so a resumed or
//! repeated search takes it from disk instead of compiling it again (NVRTC spends
//! 1.2-1.7 s of a core on each).
//!
//! One file per variant, `<BLAKE3 of the key, 32 hex digits>.cubin`: a JSON header
//! line (the key itself, the NVRTC log with ptxas's report, the CUBIN's length and
//! BLAKE3) followed by the CUBIN's bytes. Each file is written under a temporary name
//! and renamed, so no reader sees half of one, even from another process (islands on
//! one node share the cache). A file damaged anyway (cut short, edited, another key
//! under the same name) is ignored with a warning and compiled again; a cache that
//! cannot be written is a warning too, once: the search compiles as it would without.
//! Only what compiled is kept; the PTX is not (the worker loads CUBINs only).

use evo_codegen::{defines, genome_options, Compiled, PtxasReport, Toolchain};
use evo_gates::compile::{compile_all, BuiltVariant, KernelSource};
use evo_genome::{Dtype, Genome, HeadDim, Target};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A folder of cached CUBINs for one NVRTC.
#[derive(Debug)]
pub struct CubinCache {
    dir: PathBuf,
    /// The NVRTC the key names, e.g. `nvrtc-13.0`.
    nvrtc: String,
    /// Both templates' hash, as the evaluation cache keys it.
    template: String,
    /// Variants taken from the cache, and variants compiled and stored in it.
    taken: AtomicUsize,
    stored: AtomicUsize,
    /// Whether a failed write was reported (it is once).
    write_failed: AtomicBool,
}

/// The first line of a cache file.
#[derive(Serialize, Deserialize)]
struct Header {
    key: String,
    name: String,
    options: Vec<String>,
    log: String,
    cubin_len: usize,
    cubin_blake3: String,
}

impl CubinCache {
    /// The cache in `dir` (created if missing) for the CUBINs of `toolchain`.
    pub fn open(dir: &Path, toolchain: &Toolchain) -> std::io::Result<CubinCache> {
        std::fs::create_dir_all(dir)?;
        Ok(CubinCache {
            dir: dir.to_path_buf(),
            nvrtc: toolchain.label(),
            template: evo_codegen::template_hash(),
            taken: AtomicUsize::new(0),
            stored: AtomicUsize::new(0),
            write_failed: AtomicBool::new(false),
        })
    }

    /// The user's cache folder for CUBINs: `$XDG_CACHE_HOME/evo/cubins`, else
    /// `$HOME/.cache/evo/cubins`; none without either variable.
    pub fn default_dir() -> Option<PathBuf> {
        let nonempty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
        let base = nonempty("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("evo").join("cubins"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `CUBIN cache <dir>: 12 variants taken from it, 30 compiled into it`.
    pub fn line(&self) -> String {
        format!(
            "CUBIN cache {}: {} variants taken from it, {} compiled into it",
            self.dir.display(),
            self.taken.load(Ordering::Relaxed),
            self.stored.load(Ordering::Relaxed)
        )
    }

    /// Everything the variant's CUBIN depends on, as text; the include folder is left
    /// out (its path differs between machines, its headers come with the NVRTC release).
    fn key(&self, genome: &Genome, head_dim: HeadDim, dtype: Dtype, target: Target) -> String {
        format!(
            "evo CUBIN cache 1\ntemplate {}\n{}\noptions {}\ndefines {}\n",
            self.template,
            self.nvrtc,
            genome_options(genome, target).build().join(" "),
            defines(genome, head_dim, dtype).flags().join(" ")
        )
    }

    fn path(&self, key: &str) -> PathBuf {
        let hash = blake3::hash(key.as_bytes()).to_hex();
        self.dir.join(format!("{}.cubin", &hash[..32]))
    }

    /// The cached compile of one variant, or none (a damaged file is reported).
    fn get(
        &self,
        genome: &Genome,
        head_dim: HeadDim,
        dtype: Dtype,
        target: Target,
    ) -> Option<Compiled> {
        let key = self.key(genome, head_dim, dtype, target);
        let path = self.path(&key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(
                    "{}: cannot read a cached CUBIN ({e}); compiling it",
                    path.display()
                );
                return None;
            }
        };
        match parse(&bytes, &key) {
            Ok(compiled) => {
                self.taken.fetch_add(1, Ordering::Relaxed);
                Some(compiled)
            }
            Err(why) => {
                tracing::warn!(
                    "{}: ignored a damaged cached CUBIN ({why}); compiling it again",
                    path.display()
                );
                None
            }
        }
    }

    /// Keeps one compiled variant; a failure to write is reported once and changes
    /// nothing else.
    fn put(
        &self,
        genome: &Genome,
        head_dim: HeadDim,
        dtype: Dtype,
        target: Target,
        compiled: &Compiled,
    ) {
        let key = self.key(genome, head_dim, dtype, target);
        let path = self.path(&key);
        let header = Header {
            key,
            name: compiled.name.clone(),
            options: compiled.options.clone(),
            log: compiled.log.clone(),
            cubin_len: compiled.cubin.len(),
            cubin_blake3: blake3::hash(&compiled.cubin).to_hex().to_string(),
        };
        let mut bytes = serde_json::to_vec(&header).expect("a header always serializes");
        bytes.push(b'\n');
        bytes.extend_from_slice(&compiled.cubin);
        // A name no other writer uses, renamed into place whole. Not `write_atomic` of
        // the lineage crate: its temporary name is the same for every writer (islands on
        // one node may keep the same variant at once), and it syncs to disk, which a
        // cache need not (a file lost is compiled again).
        let temporary = self.dir.join(format!(
            ".{}.{}.{:?}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("cubin"),
            std::process::id(),
            std::thread::current().id()
        ));
        let written =
            std::fs::write(&temporary, &bytes).and_then(|()| std::fs::rename(&temporary, &path));
        match written {
            Ok(()) => {
                self.stored.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&temporary);
                if !self.write_failed.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "{}: cannot keep compiled CUBINs here ({e}); the search goes on without keeping them",
                        self.dir.display()
                    );
                }
            }
        }
    }
}

/// A cache file's compile, checked against the key it should hold.
fn parse(bytes: &[u8], key: &str) -> Result<Compiled, String> {
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("no header line")?;
    let header: Header =
        serde_json::from_slice(&bytes[..newline]).map_err(|e| format!("unreadable header: {e}"))?;
    if header.key != key {
        return Err("it holds another variant".into());
    }
    let cubin = &bytes[newline + 1..];
    if cubin.len() != header.cubin_len {
        return Err(format!(
            "{} bytes of CUBIN where the header says {}",
            cubin.len(),
            header.cubin_len
        ));
    }
    if blake3::hash(cubin).to_hex().as_str() != header.cubin_blake3 {
        return Err("the CUBIN's bytes do not match their hash".into());
    }
    Ok(Compiled {
        name: header.name,
        ptx: String::new(),
        cubin: cubin.to_vec(),
        report: PtxasReport::parse(&header.log),
        log: header.log,
        options: header.options,
        seconds: 0.0,
    })
}

/// Builds `source` at each of `variants` (in parallel, on the current rayon pool),
/// taking from `cache` what it holds and keeping there what compiles; results in the
/// order of `variants`. Only genomes are cached: a hand-written file has no key.
pub(crate) fn compile_cached(
    toolchain: &Toolchain,
    cache: Option<&CubinCache>,
    source: &KernelSource,
    variants: &[(HeadDim, Dtype)],
    target: Target,
) -> Vec<BuiltVariant> {
    let (Some(cache), Some(genome)) = (cache, source.genome()) else {
        return compile_all(toolchain, std::slice::from_ref(source), variants, target)
            .pop()
            .unwrap_or_default();
    };
    let cached: Vec<Option<Compiled>> = variants
        .iter()
        .map(|&(d, t)| cache.get(genome, d, t, target))
        .collect();
    let missing: Vec<(HeadDim, Dtype)> = variants
        .iter()
        .zip(&cached)
        .filter(|(_, c)| c.is_none())
        .map(|(v, _)| *v)
        .collect();
    let compiled = compile_all(toolchain, std::slice::from_ref(source), &missing, target)
        .pop()
        .unwrap_or_default();
    for v in &compiled {
        if let Ok(c) = &v.result {
            cache.put(genome, v.head_dim, v.dtype, target, c);
        }
    }
    let mut compiled = compiled.into_iter();
    variants
        .iter()
        .zip(cached)
        .map(|(&(head_dim, dtype), c)| match c {
            Some(c) => BuiltVariant {
                head_dim,
                dtype,
                result: Ok(c),
            },
            None => compiled.next().expect("one compile per variant missing"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fa2() -> Genome {
        evo_genome::GenomeFile::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa2.toml"),
        )
        .unwrap()
        .genes
    }

    fn toolchain() -> Toolchain {
        Toolchain::discover().expect("NVRTC (run `just nvrtc`)")
    }

    fn source(genome: Genome) -> KernelSource {
        KernelSource::Genome {
            name: genome.id().to_string(),
            genome,
        }
    }

    const SEED_VARIANT: [(HeadDim, Dtype); 1] = [(HeadDim::D64, Dtype::F16)];

    /// A second compile of the same genome is a hit (no NVRTC: the same bytes back);
    /// another dtype, another target or another NVRTC is another key.
    #[test]
    fn a_second_compile_of_a_genome_comes_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let tc = toolchain();
        let cache = CubinCache::open(dir.path(), &tc).unwrap();
        let genome = fa2();
        let first = compile_cached(
            &tc,
            Some(&cache),
            &source(genome),
            &SEED_VARIANT,
            Target::Sm90,
        );
        let first = first[0].result.as_ref().expect("fa2 compiles");
        assert_eq!(
            (
                cache.taken.load(Ordering::Relaxed),
                cache.stored.load(Ordering::Relaxed)
            ),
            (0, 1)
        );
        let second = compile_cached(
            &tc,
            Some(&cache),
            &source(genome),
            &SEED_VARIANT,
            Target::Sm90,
        );
        let second = second[0].result.as_ref().unwrap();
        assert_eq!(cache.taken.load(Ordering::Relaxed), 1, "{}", cache.line());
        assert_eq!(second.cubin, first.cubin);
        assert_eq!(
            second.report, first.report,
            "ptxas's report comes back with it"
        );
        assert!(second.seconds == 0.0 && first.seconds > 0.0);

        assert!(cache
            .get(&genome, HeadDim::D64, Dtype::Bf16, Target::Sm90)
            .is_none());
        assert!(cache
            .get(&genome, HeadDim::D64, Dtype::F16, Target::Sm89)
            .is_none());
        let other_nvrtc = CubinCache {
            nvrtc: "nvrtc-99.0".into(),
            ..CubinCache::open(dir.path(), &tc).unwrap()
        };
        assert!(other_nvrtc
            .get(&genome, HeadDim::D64, Dtype::F16, Target::Sm90)
            .is_none());
        let other_template = CubinCache {
            template: "0123456789abcdef".into(),
            ..CubinCache::open(dir.path(), &tc).unwrap()
        };
        assert!(other_template
            .get(&genome, HeadDim::D64, Dtype::F16, Target::Sm90)
            .is_none());
    }

    /// Cut short, overwritten, or holding another key: ignored (a miss), never a panic;
    /// the next compile puts a whole file back.
    #[test]
    fn damaged_cache_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let tc = toolchain();
        let cache = CubinCache::open(dir.path(), &tc).unwrap();
        let genome = fa2();
        compile_cached(
            &tc,
            Some(&cache),
            &source(genome),
            &SEED_VARIANT,
            Target::Sm90,
        );
        let path = cache.path(&cache.key(&genome, HeadDim::D64, Dtype::F16, Target::Sm90));
        let whole = std::fs::read(&path).unwrap();
        let other_key = {
            let text = String::from_utf8_lossy(&whole).replacen(
                "evo CUBIN cache 1",
                "evo CUBIN cache 0",
                1,
            );
            text.into_bytes()
        };
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 0xff;
        for damaged in [
            whole[..whole.len() / 2].to_vec(),
            whole[..10].to_vec(),
            Vec::new(),
            b"not a cache file".to_vec(),
            flipped,
            other_key,
        ] {
            std::fs::write(&path, &damaged).unwrap();
            assert!(cache
                .get(&genome, HeadDim::D64, Dtype::F16, Target::Sm90)
                .is_none());
        }
        let again = compile_cached(
            &tc,
            Some(&cache),
            &source(genome),
            &SEED_VARIANT,
            Target::Sm90,
        );
        assert!(again[0].result.is_ok());
        assert!(cache
            .get(&genome, HeadDim::D64, Dtype::F16, Target::Sm90)
            .is_some());
    }

    /// A folder that cannot be written costs only the keeping.
    #[test]
    fn a_cache_that_cannot_be_written_is_no_failure() {
        let dir = tempfile::tempdir().unwrap();
        let tc = toolchain();
        let cache = CubinCache::open(dir.path(), &tc).unwrap();
        std::fs::remove_dir(dir.path()).unwrap();
        let genome = fa2();
        let built = compile_cached(
            &tc,
            Some(&cache),
            &source(genome),
            &SEED_VARIANT,
            Target::Sm90,
        );
        assert!(built[0].result.is_ok());
        assert_eq!(cache.stored.load(Ordering::Relaxed), 0);
    }
}
