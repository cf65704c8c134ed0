//! An export of the recorded H100 table without a GPU or NVRTC (its manifest and an empty
//! file per kernel), and what the runtime's integration tests do with one: run the
//! export's Python module on it, edit its manifest. Each test file uses its part.
#![allow(dead_code)]

use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::Dtype;
use evo_runtime::export::{
    BackwardChampionEntry, ChampionEntry, KernelEntry, Manifest, MANIFEST_FILE, MANIFEST_FORMAT,
};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The stdout of `script` run by python3 with the export's Python module importable and
/// the export folders `exports` as its arguments, in order; the script must succeed.
pub fn python_stdout_of(script: &str, exports: &[&Path]) -> String {
    let o = Command::new("python3")
        .args(["-c", script])
        .args(exports)
        .env("PYTHONPATH", repo().join("crates/runtime/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text.trim().to_string()
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_folder(&path, &dest);
        } else {
            std::fs::copy(&path, dest).unwrap();
        }
    }
}

/// An export of the recorded table without kernels: the manifest `evo export` would
/// write, the table with its champions, and an empty file per kernel.
pub fn fake_export(out: &Path) -> DispatchTable {
    let champions = repo().join("genomes/champions/h100");
    std::fs::create_dir_all(out.join("kernels")).unwrap();
    copy_folder(&champions, out);
    let table = DispatchTable::load(&out.join(DISPATCH_FILE)).unwrap_or_else(|e| panic!("{e}"));
    let entries = table
        .classes
        .iter()
        .map(|c| {
            let p = c.problem().unwrap();
            let kernels = |stem: fn(&str, Dtype) -> String| {
                Dtype::ALL
                    .into_iter()
                    .map(|dtype| {
                        let ptx = format!("kernels/{}.ptx", stem(&c.name, dtype));
                        std::fs::write(out.join(&ptx), "").unwrap();
                        KernelEntry {
                            dtype,
                            arch: "sm_90a".into(),
                            ptx,
                            cubin: None,
                        }
                    })
                    .collect()
            };
            ChampionEntry {
                class: c.name.clone(),
                shape: c.shape.clone(),
                batch: p.batch,
                heads: p.heads,
                q_len: p.q_len,
                kv_len: p.kv_len,
                head_dim: p.head_dim.get(),
                causal: p.causal,
                genome: c.name.clone(),
                genome_id: "0".repeat(16),
                family: "hopper".into(),
                median_us: c.median_us,
                cudnn_us: c.cudnn_us,
                measured_dtype: Some("f16".into()),
                bench: c.bench.clone(),
                experiment: c.experiment.clone(),
                kernels: kernels(KernelEntry::file_stem),
                lse_kernels: kernels(KernelEntry::lse_file_stem),
            }
        })
        .collect();
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        evo_version: "0.1.0".into(),
        nvrtc_version: "13.5".into(),
        device: table.device.clone(),
        arch: "sm_90a".into(),
        dispatch: DISPATCH_FILE.into(),
        library: None,
        champions: entries,
        tolerances: Vec::new(),
        backward: table
            .backward
            .iter()
            .map(|b| BackwardChampionEntry {
                head_dim: b.head_dim,
                dtype: b.dtype,
                genome_file: b.genome.clone(),
                genome: "fa2-bwd".into(),
                genome_id: "0".repeat(16),
                family: "ampere_bwd".into(),
                origin: b.origin.clone(),
                kernels: b
                    .serves()
                    .into_iter()
                    .map(|(d, dtype)| {
                        let ptx =
                            format!("kernels/{}.ptx", BackwardChampionEntry::file_stem(d, dtype));
                        std::fs::write(out.join(&ptx), "").unwrap();
                        KernelEntry {
                            dtype,
                            arch: "sm_90".into(),
                            ptx,
                            cubin: None,
                        }
                    })
                    .collect(),
            })
            .collect(),
    };
    std::fs::write(
        out.join(MANIFEST_FILE),
        serde_json::to_string(&manifest).unwrap(),
    )
    .unwrap();
    table
}

/// Writes the export's manifest again with `edit` applied to its JSON.
pub fn edit_manifest(
    export: &Path,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) {
    let path = export.join(MANIFEST_FILE);
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(json.as_object_mut().unwrap());
    std::fs::write(&path, json.to_string()).unwrap();
}

/// Drops the manifest's backward entry of head dim `d` (which it must have), as an
/// export of a table without one would be.
pub fn drop_backward(export: &Path, d: u32) {
    edit_manifest(export, |m| {
        let backward = m["backward"].as_array_mut().unwrap();
        let before = backward.len();
        backward.retain(|b| b["head_dim"] != d);
        assert_eq!(backward.len(), before - 1, "one backward entry of D{d}");
    });
}
