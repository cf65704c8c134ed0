//! Finding NVRTC: the CUDA headers and `libnvrtc`, without a GPU and without a driver.
//!
//! cudarc opens `libnvrtc` by bare file name (`dlopen("libnvrtc.so.13")`), which only
//! the dynamic loader's search path resolves, and it panics when nothing matches.
//! Discovery therefore (1) finds a folder that holds both the headers and the
//! library, (2) opens the library by its absolute path, so that the loader knows its
//! soname and cudarc's later `dlopen` by name returns this very copy, no
//! `LD_LIBRARY_PATH` needed, and (3) asks cudarc whether it can now see a
//! library before making any call through it. A missing toolchain is an error
//! that says where it looked and how to install one, never a panic.
//!
//! `$EVO_NVRTC_DIR`, when set, is the only place searched: an explicit choice
//! must not silently fall back to another NVRTC whose register counts differ.
//! Otherwise, first match wins:
//! 1. `$CUDA_HOME`, `$CUDA_PATH`
//! 2. `/usr/local/cuda`
//! 3. Python site-packages derivable from the environment: `$VIRTUAL_ENV/lib/python3*/site-packages`
//!    and every `$PYTHONPATH` entry (where `pip install nvidia-cuda-nvrtc` puts `nvidia/cu13/`)
//! 4. `.nvrtc/` in the current directory or one of its ancestors, then the `.nvrtc/`
//!    of the checkout this binary was built from (`.ci/run` installs there)
//!
//! Each place may be a CUDA toolkit (`include/`, `lib64/` or `lib/`) or a pip
//! target (`nvidia/cu13/{include,lib}` below it).

use crate::CodegenError;
use std::ffi::c_int;
use std::path::{Path, PathBuf};

/// The pip command that installs the pinned toolchain into the repository.
pub const INSTALL_HINT: &str =
    "pip install nvidia-cuda-nvrtc==13.5.37 nvidia-cuda-runtime==13.5.37 \
     nvidia-cuda-crt==13.5.37 --target .nvrtc";

/// Headers the template includes; a folder without them cannot compile it.
const REQUIRED_HEADERS: [&str; 3] = ["cuda_fp16.h", "cuda_bf16.h", "mma.h"];

/// Library file names, preferred first (the toolkit's unversioned name is a symlink).
const LIBRARY_NAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// A usable NVRTC: its version, the CUDA include directory and where libnvrtc came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// `(major, minor)` as reported by the loaded library's `nvrtcVersion`.
    pub nvrtc_version: (i32, i32),
    /// Holds `cuda_fp16.h`, `cuda_bf16.h`, `mma.h`; passed as `-I`.
    pub include_dir: PathBuf,
    /// The folder libnvrtc was opened from; `None` when the loader's default
    /// search path (`LD_LIBRARY_PATH`, ld.so.conf) supplied it.
    pub lib_dir: Option<PathBuf>,
}

/// One place discovery looks, labelled with where it came from (for the error message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    /// E.g. `EVO_NVRTC_DIR`, `CUDA_HOME`, `VIRTUAL_ENV site-packages`.
    pub origin: String,
    pub root: PathBuf,
}

impl SearchPath {
    fn new(origin: impl Into<String>, root: impl Into<PathBuf>) -> SearchPath {
        SearchPath {
            origin: origin.into(),
            root: root.into(),
        }
    }
}

/// The places searched, in order, from the current environment (see the module docs).
pub fn search_paths() -> Vec<SearchPath> {
    if let Some(dir) = std::env::var_os("EVO_NVRTC_DIR").filter(|v| !v.is_empty()) {
        return vec![SearchPath::new("EVO_NVRTC_DIR", dir)];
    }
    let mut out = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            out.push(SearchPath::new(var, v));
        }
    }
    out.push(SearchPath::new("default toolkit", "/usr/local/cuda"));
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        let lib = Path::new(&venv).join("lib");
        let mut site: Vec<PathBuf> = std::fs::read_dir(&lib)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .map(|p| p.join("site-packages"))
            .collect();
        site.sort();
        out.extend(
            site.into_iter()
                .map(|p| SearchPath::new("VIRTUAL_ENV site-packages", p)),
        );
    }
    if let Some(pp) = std::env::var_os("PYTHONPATH") {
        out.extend(
            std::env::split_paths(&pp)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| SearchPath::new("PYTHONPATH entry", p)),
        );
    }
    if let Ok(cwd) = std::env::current_dir() {
        out.extend(
            cwd.ancestors()
                .map(|dir| SearchPath::new(".nvrtc of the working directory", dir.join(".nvrtc"))),
        );
    }
    // crates/codegen -> the repository root this binary was built from.
    if let Some(checkout) = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2) {
        let dir = checkout.join(".nvrtc");
        if !out.iter().any(|p| p.root == dir) {
            out.push(SearchPath::new(".nvrtc of the build checkout", dir));
        }
    }
    out
}

/// A folder pair found under one search path.
struct Candidate {
    include_dir: PathBuf,
    library: Option<PathBuf>,
}

/// Looks for headers and library under `root` in the toolkit and pip layouts.
/// `Err` says what is missing, for the error message.
fn probe(root: &Path) -> Result<Candidate, String> {
    if !root.is_dir() {
        return Err("not a directory".into());
    }
    let layouts = [root.to_path_buf(), root.join("nvidia").join("cu13")];
    for base in &layouts {
        let include_dir = base.join("include");
        if !REQUIRED_HEADERS
            .iter()
            .all(|h| include_dir.join(h).is_file())
        {
            continue;
        }
        let library = ["lib64", "lib"]
            .iter()
            .flat_map(|lib| LIBRARY_NAMES.iter().map(move |n| base.join(lib).join(n)))
            .find(|p| p.is_file());
        return Ok(Candidate {
            include_dir,
            library,
        });
    }
    Err(format!(
        "no include/{{{}}} here or under nvidia/cu13/",
        REQUIRED_HEADERS.join(",")
    ))
}

/// Reads `nvrtcVersion` from a library opened by path (independently of cudarc).
fn library_version(lib: &libloading::Library) -> Option<(i32, i32)> {
    type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
    // SAFETY: `nvrtcVersion` has had this C signature in every NVRTC release; the
    // symbol is looked up in the library we just opened and called while it is open.
    unsafe {
        let f: libloading::Symbol<VersionFn> = lib.get(b"nvrtcVersion\0").ok()?;
        let (mut major, mut minor) = (0, 0);
        (f(&mut major, &mut minor) == 0).then_some((major, minor))
    }
}

/// The version of the libnvrtc cudarc resolves to.
fn cudarc_version() -> Result<(i32, i32), CodegenError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: only called after `is_culib_present()` returned true, so cudarc's
    // lazy loader finds a library instead of panicking; the out-pointers are live locals.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|error| CodegenError::Nvrtc {
            name: "<toolchain>".into(),
            call: "nvrtcVersion",
            error,
        })?;
    Ok((major, minor))
}

fn culib_present() -> bool {
    // SAFETY: probing only dlopens/dlcloses candidate names; no symbol is called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

impl Toolchain {
    /// Finds NVRTC in the places listed in the module docs.
    pub fn discover() -> Result<Toolchain, CodegenError> {
        Toolchain::discover_in(&search_paths())
    }

    /// Finds NVRTC in the given places only (tests, and callers with their own layout).
    pub fn discover_in(paths: &[SearchPath]) -> Result<Toolchain, CodegenError> {
        let mut searched = Vec::new();
        let mut headers_only: Option<PathBuf> = None;
        for path in paths {
            let label = format!("{} = {}", path.origin, path.root.display());
            match probe(&path.root) {
                Ok(Candidate {
                    include_dir,
                    library: Some(library),
                }) => return Toolchain::open(include_dir, &library),
                Ok(Candidate {
                    include_dir,
                    library: None,
                }) => {
                    searched.push(format!(
                        "{label}: headers, but no libnvrtc in lib64/ or lib/"
                    ));
                    headers_only.get_or_insert(include_dir);
                }
                Err(why) => searched.push(format!("{label}: {why}")),
            }
        }
        // Headers from a search path, library from the loader's own path (a
        // distribution package that installs libnvrtc into /usr/lib, say).
        if let Some(include_dir) = headers_only {
            if culib_present() {
                return Ok(Toolchain {
                    nvrtc_version: cudarc_version()?,
                    include_dir,
                    lib_dir: None,
                });
            }
            searched.push("the dynamic loader's search path: no libnvrtc".into());
        }
        Err(CodegenError::ToolchainMissing { searched })
    }

    /// Opens `library` by path and checks that cudarc resolves to the same release.
    fn open(include_dir: PathBuf, library: &Path) -> Result<Toolchain, CodegenError> {
        let missing = |why: String| CodegenError::ToolchainMissing {
            searched: vec![format!("{}: {why}", library.display())],
        };
        // SAFETY: loading libnvrtc runs only its ELF initialisers, which have no
        // preconditions; it is the library cudarc would load itself.
        let lib = unsafe { libloading::Library::new(library) }
            .map_err(|e| missing(format!("cannot be loaded: {e}")))?;
        let version = library_version(&lib)
            .ok_or_else(|| missing("has no working nvrtcVersion symbol".into()))?;
        // Keep the library mapped for the life of the process: cudarc's handles
        // resolve to it by soname and must never dangle.
        std::mem::forget(lib);
        if !culib_present() {
            return Err(missing(
                "was loaded, but cudarc's lookup by name does not resolve to it".into(),
            ));
        }
        let used = cudarc_version()?;
        if used != version {
            return Err(CodegenError::ToolchainMismatch {
                library: library.to_path_buf(),
                found: version,
                used,
            });
        }
        Ok(Toolchain {
            nvrtc_version: version,
            include_dir,
            lib_dir: library.parent().map(Path::to_path_buf),
        })
    }

    /// `nvrtc-13.5`: part of the evaluation cache key, since register counts move
    /// between NVRTC releases.
    pub fn label(&self) -> String {
        format!("nvrtc-{}.{}", self.nvrtc_version.0, self.nvrtc_version.1)
    }
}
