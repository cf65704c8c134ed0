//! `evo export` on the recorded H100 champions (PTX, no GPU): the files, the manifest
//! against the table and the genomes, the header's prototype, the runtime reading the
//! export back, and the Python module dispatching shapes as evo does, without torch.
//!
//! Needs NVRTC (as the compile tests) and python3.

use crate::util::{evo, export_champions, repo_root, stderr, stdout};
use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::{GenomeFile, Problem};
use evo_runtime::export::{Export, Manifest, MANIFEST_FILE};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const CHAMPIONS: &str = "genomes/champions/h100";

fn export(out: &Path, extra: &[&str]) -> std::process::Output {
    export_champions(out, extra)
}

/// Runs `python3 -c SCRIPT` with OUT/python on the path and `input` on stdin.
fn python(out: &Path, script: &str, input: &str) -> std::process::Output {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .env("PYTHONPATH", out.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Shapes on and between the classes: both masks, every head dim, Lq != Lk, tiny and
/// huge, multi-head and grouped (with and without a window), so that every kind of the
/// rule is chosen.
fn shapes() -> Vec<Problem> {
    let mut out = Vec::new();
    for (b, h, kv) in [
        (1, 1, ""),
        (1, 8, ""),
        (2, 16, ""),
        (4, 16, ""),
        (8, 32, ""),
        (16, 32, ",kv=8"),
        (2, 32, ",kv=1"),
    ] {
        for (lq, lk) in [
            (1, 1),
            (77, 1000),
            (512, 512),
            (1024, 1024),
            (4096, 4096),
            (16384, 16384),
        ] {
            for d in [64, 96, 128, 256] {
                for mask in ["", ",causal", ",causal=br", ",causal,window=256:"] {
                    let spec = format!("{b},{h},{lq},{lk},{d},bf16{mask}{kv}");
                    out.push(spec.parse().unwrap());
                }
            }
        }
    }
    out
}

const DISPATCH_SCRIPT: &str = r#"
import json, sys
import evo_attention
from evo_attention.dispatch import Manifest
assert "torch" not in sys.modules, "importing evo_attention imported torch"
m = Manifest()
out = []
for b, h, lq, lk, d, causal, kv, windowed in json.load(sys.stdin):
    c = m.choose(b, h, lq, lk, d, causal, kv, windowed)
    out.append(c["class"] if c else None)
out.append(m.choose(1, 8, 512, 512, 80, False))
print(json.dumps(out))
"#;

const LIBRARY_SCRIPT: &str = r#"
import evo_attention
from evo_attention import _lib
m = evo_attention.manifest()
lib = _lib.Library(_lib.library_path(m), m.export_dir)
print(lib.version())
# Fake pointers: without a GPU the runtime says so (3), with one it refuses them (1).
print(lib.forward(16, 32, 48, 64, (1, 8, 512, 512, 64), _lib.DTYPE_F16, False, None))
print(lib.forward(16, 32, 48, 64, (1, 8, 512, 512, 96), _lib.DTYPE_F16, False, None))
print(lib.forward(16, 32, 48, 64, (1, 8, 512, 512, 80), _lib.DTYPE_F16, False, None), lib.last_error())
# The gradient calls. D256 has a backward kernel: its fake pointers get the forward's
# status. D80 has no champion at all, and a copy of the export without D256's backward
# entry has no backward kernel for it: EVO_ERROR_UNSUPPORTED (2) whatever the pointers,
# before any GPU is needed.
print(lib.has_backward)
print(lib.backward(16, 32, 48, 64, 80, 96, 112, 128, 144, (1, 8, 512, 512, 256), 8, _lib.DTYPE_BF16, True, None))
print(lib.backward(16, 32, 48, 64, 80, 96, 112, 128, 144, (1, 8, 512, 512, 80), 8, _lib.DTYPE_BF16, True, None), lib.last_error())
import json, os, shutil, tempfile
with tempfile.TemporaryDirectory() as tmp:
    copy = os.path.join(tmp, "export")
    shutil.copytree(m.export_dir, copy)
    path = os.path.join(copy, "manifest.json")
    with open(path) as f:
        data = json.load(f)
    data["backward"] = [b for b in data["backward"] if b["head_dim"] != 256]
    with open(path, "w") as f:
        json.dump(data, f)
    # evo_init on the copy: the library's calls now serve it.
    lib = _lib.Library(_lib.library_path(m), copy)
    print(lib.backward(16, 32, 48, 64, 80, 96, 112, 128, 144, (1, 8, 512, 512, 256), 8, _lib.DTYPE_BF16, True, None), lib.last_error())
    print(lib.backward(16, 32, 48, 64, 80, 96, 112, 128, 144, (1, 8, 512, 512, 128), 8, _lib.DTYPE_BF16, True, None))
"#;

#[test]
fn export_writes_a_package_the_runtime_and_python_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let o = export(&out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!(
            "exported {} champions",
            DispatchTable::load(&repo_root().join(CHAMPIONS).join(DISPATCH_FILE))
                .unwrap()
                .classes
                .len()
        )),
        "{}",
        stdout(&o)
    );

    // The manifest: one entry per class, in the table's order, with its genome and figures.
    let table = DispatchTable::load(&repo_root().join(CHAMPIONS).join(DISPATCH_FILE)).unwrap();
    let manifest: Manifest =
        serde_json::from_str(&std::fs::read_to_string(out.join(MANIFEST_FILE)).unwrap()).unwrap();
    assert_eq!(manifest.evo_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest.device, table.device);
    assert_eq!(manifest.arch, "sm_90a");
    assert!(
        manifest.nvrtc_version.split('.').count() == 2,
        "{}",
        manifest.nvrtc_version
    );
    assert_eq!(manifest.champions.len(), table.classes.len());
    assert_eq!(manifest.tolerances.len(), 2);
    for (entry, class) in manifest.champions.iter().zip(&table.classes) {
        assert_eq!(entry.class, class.name);
        let genome = GenomeFile::load(&repo_root().join(CHAMPIONS).join(&class.champion)).unwrap();
        assert_eq!(entry.genome_id, genome.genes.id().to_string());
        assert_eq!(entry.median_us, class.median_us);
        assert_eq!(entry.cudnn_us, class.cudnn_us);
        assert_eq!(entry.measured_dtype.as_deref(), Some("f16"));
        let p = class.problem().unwrap();
        assert_eq!(
            (entry.batch, entry.heads, entry.q_len, entry.kv_len),
            (p.batch, p.heads, p.q_len, p.kv_len)
        );
        assert_eq!(entry.kernels.len(), 2, "{}: f16 and bf16", entry.class);
        for k in &entry.kernels {
            assert_eq!(k.cubin, None, "PTX only without --cubin");
            let ptx = std::fs::read_to_string(out.join(&k.ptx)).unwrap();
            assert!(
                ptx.contains(&format!(".target {}", k.arch)),
                "{}: {}",
                k.ptx,
                k.arch
            );
            assert!(ptx.contains(".entry evo_attention_fwd"), "{}", k.ptx);
            assert!(ptx.contains("evo_geometry"), "{}", k.ptx);
            // The plain kernel has no lse output: its speed is the champion's.
            assert!(!ptx.contains("evo_lse"), "{}: declares evo_lse", k.ptx);
        }
        // Its lse twins, one per dtype: the same genome with EVO_LSE = 1.
        let dtypes = |ks: &[evo_runtime::export::KernelEntry]| -> Vec<_> {
            ks.iter().map(|k| (k.dtype, k.arch.clone())).collect()
        };
        assert_eq!(dtypes(&entry.lse_kernels), dtypes(&entry.kernels));
        for k in &entry.lse_kernels {
            assert!(k.ptx.ends_with(".lse.ptx"), "{}", k.ptx);
            let ptx = std::fs::read_to_string(out.join(&k.ptx)).unwrap();
            assert!(ptx.contains(".b8 evo_lse[4] = {1};"), "{}", k.ptx);
            assert!(ptx.contains(".entry evo_attention_fwd"), "{}", k.ptx);
        }
    }
    assert_eq!(
        std::fs::read_to_string(out.join(DISPATCH_FILE)).unwrap(),
        std::fs::read_to_string(repo_root().join(CHAMPIONS).join(DISPATCH_FILE)).unwrap()
    );

    // The backward: one entry per [[backward]] entry of the table, its genome's id, a
    // module of the backward ABI per dtype (sm_90a for the Hopper family's wgmma, plain
    // sm_90 for the Ampere family's mma.sync).
    assert!(
        !table.backward.is_empty(),
        "the recorded table has backward entries"
    );
    assert_eq!(manifest.backward.len(), table.backward.len());
    for (entry, b) in manifest.backward.iter().zip(&table.backward) {
        assert_eq!((entry.head_dim, entry.dtype), (b.head_dim, b.dtype));
        assert_eq!(entry.origin, b.origin);
        let genome = GenomeFile::load(&repo_root().join(CHAMPIONS).join(&b.genome)).unwrap();
        assert_eq!(entry.genome_id, genome.genes.id().to_string());
        assert_eq!(entry.kernels.len(), 2, "D{}: f16 and bf16", b.head_dim);
        let arch = if genome.genes.family == evo_genome::Family::HopperBwd {
            "sm_90a"
        } else {
            "sm_90"
        };
        for k in &entry.kernels {
            assert_eq!(k.arch, arch);
            let ptx = std::fs::read_to_string(out.join(&k.ptx)).unwrap();
            for symbol in [".entry evo_attention_bwd(", "evo_bwd_geometry", "evo_pass"] {
                assert!(ptx.contains(symbol), "{}: no {symbol}", k.ptx);
            }
        }
    }

    // The header: the C ABI's prototype.
    let header = std::fs::read_to_string(out.join("include/evo.h")).unwrap();
    assert!(
        header.contains(
            "int evo_attention_forward(const void* q, const void* k, const void* v, void* o,"
        ) && header.contains("const char* evo_last_error(void);")
            && header.contains("int evo_attention_forward_lse(")
            && header.contains("int evo_attention_backward("),
        "{header}"
    );

    // The runtime reads it back. Its picks are held to hand-worked expectations in
    // crates/runtime/tests/dispatch.rs; here they are what the Python module must agree
    // with, an implementation of its own.
    let export = Export::open(&out).unwrap_or_else(|e| panic!("{e}"));
    let shapes = shapes();
    let expected: Vec<String> = shapes
        .iter()
        .map(|p| export.choose(p).unwrap().0.class.clone())
        .collect();

    // Python, without torch: the same champion for every shape, none for a head dim no
    // class has (D80).
    let input: Vec<serde_json::Value> = shapes
        .iter()
        .map(evo_runtime::export::python_choose_args)
        .collect();
    let o = python(
        &out,
        DISPATCH_SCRIPT,
        &serde_json::to_string(&input).unwrap(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got: Vec<Option<String>> = serde_json::from_str(stdout(&o).trim()).unwrap();
    let (none, got) = got.split_last().unwrap();
    assert_eq!(none, &None, "no champion has head dim 80");
    for ((p, want), got) in shapes.iter().zip(&expected).zip(got) {
        assert_eq!(got.as_deref(), Some(want.as_str()), "python on {p}");
    }

    // The runtime library, copied in from this build, through ctypes.
    assert_eq!(
        manifest.library.as_deref(),
        Some("lib/libevo_runtime.so"),
        "cargo builds the runtime's cdylib with the evo binary"
    );
    let o = python(&out, LIBRARY_SCRIPT, "");
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines[0], env!("CARGO_PKG_VERSION"));
    // Fake pointers: no GPU here (3), or one that refuses them (1); D96 is dispatched as
    // D64 is, D80 has no champion (EVO_ERROR_UNSUPPORTED, 2).
    assert!(lines[1] == "3" || lines[1] == "1", "{lines:?}");
    assert_eq!(lines[2], lines[1], "{lines:?}");
    assert!(
        lines[3].starts_with("2 ") && lines[3].contains("D=80 has no champion"),
        "{lines:?}"
    );
    assert_eq!(lines[4], "True", "the library exports the gradient calls");
    // D256's backward is exported: its fake pointers are refused as the forward's are.
    assert_eq!(lines[5], lines[1], "{lines:?}");
    assert!(
        lines[6].starts_with("2 ") && lines[6].contains("D=80 has no champion"),
        "{lines:?}"
    );
    // The copy without D256's backward entry: UNSUPPORTED, naming what it covers; the
    // head dims it keeps get the fake-pointer status again.
    assert!(
        lines[7].starts_with("2 ")
            && lines[7].contains("no backward kernel for head dim 256 in bf16")
            && lines[7].contains("(it has D64, D96, D128)"),
        "{lines:?}"
    );
    assert_eq!(lines[8], lines[1], "{lines:?}");
    assert_eq!(lines.len(), 9, "{lines:?}");
}

#[test]
fn export_refuses_an_arch_the_champions_cannot_build_for() {
    let dir = tempfile::tempdir().unwrap();
    let o = export(&dir.path().join("x"), &["--arch", "sm_89"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("cannot be built for sm_89") && e.contains("--arch"),
        "{e}"
    );
    let o = export(&dir.path().join("x"), &["--arch", "sm_80"]);
    assert!(
        stderr(&o).contains("sm_90a, sm_90 and sm_89"),
        "{}",
        stderr(&o)
    );
    let o = export(
        &dir.path().join("x"),
        &["--lib", "/nonexistent/libevo_runtime.so"],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("cargo build --release -p evo-runtime"),
        "{}",
        stderr(&o)
    );
}

/// OUT is checked before anything is compiled: a folder no export wrote is refused
/// (named with what it holds) unless --force, as are a file, and a folder holding the
/// champions being exported.
#[test]
fn export_checks_its_destination_before_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mine");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine\n").unwrap();
    let o = export(&out, &[]);
    let e = stderr(&o);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(
        e.contains("mine: not empty and not an export")
            && e.contains("it holds notes.txt")
            && e.contains("--force"),
        "{e}"
    );
    assert!(!e.contains("compiled"), "refused before compiling: {e}");
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine\n"
    );

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let o = export(&file, &[]);
    assert!(
        !o.status.success() && stderr(&o).contains("exists and is not a folder"),
        "{}",
        stderr(&o)
    );

    // Exporting into the champions' own folder (or one above it) would replace them.
    let champions = dir.path().join("champions");
    std::fs::create_dir_all(&champions).unwrap();
    std::fs::copy(
        repo_root().join(CHAMPIONS).join(DISPATCH_FILE),
        champions.join(DISPATCH_FILE),
    )
    .unwrap();
    for target in [&champions, &dir.path().to_path_buf()] {
        let o = evo(
            &[
                "export",
                &target.display().to_string(),
                "--champions",
                &champions.display().to_string(),
                "--force",
            ],
            &[],
        );
        assert!(
            !o.status.success() && stderr(&o).contains("holds the champions being exported"),
            "{}",
            stderr(&o)
        );
        assert!(champions.join(DISPATCH_FILE).is_file());
    }
}

/// An export replaces OUT whole: files of a folder replaced with --force, and a kernel
/// of an earlier export that this one does not write, are gone; no temporary is left.
#[test]
fn export_replaces_the_whole_package() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine\n").unwrap();
    let o = export(&out, &["--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.join("notes.txt").exists());
    assert!(out.join(MANIFEST_FILE).is_file());

    let stale = out.join("kernels/b9-h9-l9-d64.f16.ptx");
    std::fs::write(&stale, "// a class since removed\n").unwrap();
    let o = export(&out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stale.exists(), "a kernel of the earlier export stayed");
    Export::open(&out).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["export".to_string()],
        "no temporary folder left"
    );
}
