//! The export on a GPU (opt-in: `cargo test --features gpu --test integration gpu_export`,
//! part of `just gpu-test`): a C program linked with the export's library runs a
//! champion and checks it and the error codes; with torch importable, the Python module
//! runs champions, falls back with one warning per reason, and refuses a CUBIN built for
//! another GPU; and the README's export commands as it gives them (`evo bench
//! --champions ... --json`, then scripts/export_check.py with that bench), which must
//! exit 0 with every class run on its own problem and champion. Needs NVRTC, a C
//! compiler (`CC`, else `cc`) and the CUDA headers (`CUDA_HOME`, else /usr/local/cuda).

use crate::util::{evo, export_champions, repo_root, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Command;

fn cuda_home() -> PathBuf {
    PathBuf::from(std::env::var("CUDA_HOME").unwrap_or_else(|_| "/usr/local/cuda".into()))
}

fn export(out: &Path) {
    let o = export_champions(out, &["--cubin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.join("lib/libevo_runtime.so").is_file(),
        "the export has no runtime library: {}",
        stderr(&o)
    );
}

#[test]
fn gpu_export_c_program_runs_a_champion() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    export(&out);
    let exe = dir.path().join("run_champion");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let source = repo_root().join("crates/runtime/tests/c/run_champion.c");
    let o = Command::new(&cc)
        .arg(&source)
        .arg(format!("-I{}", out.join("include").display()))
        .arg(format!("-I{}", cuda_home().join("include").display()))
        .arg(format!("-L{}", out.join("lib").display()))
        // Only to link when libcuda is not on the linker's path; the driver's is loaded.
        .arg(format!("-L{}", cuda_home().join("lib64/stubs").display()))
        .args(["-levo_runtime", "-lcuda", "-lm", "-O2"])
        .arg(format!("-Wl,-rpath,{}", out.join("lib").display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("the C compiler runs");
    assert!(o.status.success(), "{cc}: {}", stderr(&o));
    for shape in [
        ["1", "8", "512", "512", "64", "0"],
        ["1", "8", "512", "512", "64", "1"],
        ["1", "2", "77", "1000", "128", "1"],
    ] {
        let o = Command::new(&exe)
            .arg(&out)
            .args(shape)
            .output()
            .expect("runs");
        println!("{}", stdout(&o));
        assert!(
            o.status.success() && stdout(&o).contains("all checks passed"),
            "{shape:?}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
    }
}

const PYTHON_SMOKE: &str = r#"
import json, os, shutil, sys, warnings
import torch
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import evo_attention
from evo_attention import _lib

def rand(*shape, dtype=torch.float16, device="cuda"):
    return torch.randn(*shape, device=device).to(dtype)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for dtype in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            q, k, v = rand(1, 8, 300, 64, dtype=dtype), rand(1, 8, 700, 64, dtype=dtype), rand(1, 8, 700, 64, dtype=dtype)
            assert evo_attention.covers(q, k, v, causal)
            o = evo_attention.sdpa(q, k, v, is_causal=causal)
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            rel = ((o.float() - ref).norm() / ref.norm()).item()
            assert rel < (1.5e-3 if dtype == torch.float16 else 1.2e-2), (dtype, causal, rel)
    # Grouped heads and the other head dims, through the runtime's extended entry point
    # (the classes of the models suite: grouped prefill and decode, D96, D256).
    for h, hkv, lq, lk, d, causal in [(8, 2, 300, 700, 64, True), (32, 8, 1, 1000, 128, False),
                                      (32, 1, 1, 777, 128, False), (16, 8, 256, 256, 256, True),
                                      (4, 4, 200, 333, 96, True)]:
        q, k, v = rand(1, h, lq, d), rand(1, hkv, lk, d), rand(1, hkv, lk, d)
        assert evo_attention.covers(q, k, v, causal, enable_gqa=True), (h, hkv, d)
        o = evo_attention.sdpa(q, k, v, is_causal=causal, enable_gqa=True)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=True)
        rel = ((o.float() - ref).norm() / ref.norm()).item()
        assert rel < 1.5e-3, (h, hkv, lq, lk, d, causal, rel)
    assert not caught, [str(w.message) for w in caught]
    q80 = rand(1, 2, 64, 80)
    for _ in range(3):
        evo_attention.sdpa(q80, q80, q80)
    evo_attention.sdpa(q80.float(), q80.float(), q80.float())
    evo_attention.sdpa(q80.cpu().float(), q80.cpu().float(), q80.cpu().float())
    kinds = [str(w.message) for w in caught]
    assert len(kinds) == 3, kinds  # head dim, dtype, device: each once
    print("\n".join(kinds))

q = rand(1, 8, 128, 64)
for bad, error in [((q.float(), q.float(), q.float()), TypeError),
                   ((q.transpose(2, 3).contiguous().transpose(2, 3),) * 3, ValueError)]:
    try:
        evo_attention.forward(*bad, torch.empty_like(bad[0]))
        raise AssertionError(f"{error.__name__} expected")
    except error as e:
        print("refused:", e)

# A CUBIN built for another GPU: the runtime's own check, through the C ABI.
other = sys.argv[2]
shutil.copytree(sys.argv[1], other)
path = os.path.join(other, "manifest.json")
m = json.load(open(path))
for c in m["champions"]:
    for kernel in c["kernels"]:
        kernel["arch"] = "sm_100a"
json.dump(m, open(path, "w"))
lib = _lib.Library(os.path.join(other, "lib", "libevo_runtime.so"), other)
o = torch.empty_like(q)
status = lib.forward(q.data_ptr(), q.data_ptr(), q.data_ptr(), o.data_ptr(), (1, 8, 128, 128, 64),
                     _lib.DTYPE_F16, False, torch.cuda.current_stream().cuda_stream)
assert status == 5 and "sm_100a" in lib.last_error(), (status, lib.last_error())
print("foreign arch:", lib.last_error())
print("python smoke passed")
"#;

/// Whether python3 imports torch with a CUDA device (else the Python tests say they
/// are skipped).
fn torch_with_cuda() -> bool {
    let torch = Command::new("python3")
        .args(["-c", "import torch; assert torch.cuda.is_available()"])
        .output();
    let ok = torch.is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: python3 cannot import torch with CUDA here");
    }
    ok
}

#[test]
fn gpu_export_python_runs_falls_back_and_refuses() {
    if !torch_with_cuda() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    export(&out);
    let o = Command::new("python3")
        .args(["-c", PYTHON_SMOKE])
        .arg(&out)
        .arg(dir.path().join("foreign"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    println!("{}", stdout(&o));
    assert!(
        o.status.success() && stdout(&o).contains("python smoke passed"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// The README's export section as written: export, bench the champions on this GPU,
/// then `python3 scripts/export_check.py OUT --bench bench.json`. Every class of the
/// table must run on its own problem (grouped heads, diagonal, window) and champion,
/// within GREEN's tolerances and within the script's stated tolerance of the bench.
#[test]
fn gpu_export_check_as_the_readme_gives_it() {
    if !torch_with_cuda() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("h100");
    export(&out);
    let bench = dir.path().join("bench.json");
    let o = evo(
        &[
            "bench",
            "--champions",
            "genomes/champions/h100",
            "--json",
            bench.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        o.status.success(),
        "evo bench: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = Command::new("python3")
        .arg(repo_root().join("scripts/export_check.py"))
        .arg(&out)
        .arg("--bench")
        .arg(&bench)
        .current_dir(repo_root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .output()
        .expect("python3 runs");
    let text = stdout(&o);
    println!("{text}{}", stderr(&o));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let classes = manifest["champions"].as_array().unwrap().len();
    assert!(
        o.status.success() && text.contains(&format!("{classes} of {classes} classes ok")),
        "export_check.py failed:\n{text}{}",
        stderr(&o)
    );
    for c in manifest["champions"].as_array().unwrap() {
        let class = c["class"].as_str().unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{class} ")))
            .unwrap_or_else(|| panic!("no verdict line for {class}:\n{text}"));
        assert!(line.contains(" ok: "), "{line}");
    }
}
