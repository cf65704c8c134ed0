//! Which champion the runtime runs for a problem, against picks worked out by hand from
//! the rule dispatch.toml states (head dim; then the same kind, else the same mask; then
//! the nearest work; ties to the nearest key length, then the nearest group), on the
//! recorded H100 table: the Rust runtime (`Export::choose`, what the C ABI runs) and the
//! export's Python module (`evo_attention.dispatch`, what `sdpa` runs) must both give
//! them; the backward kernel of a head dim and dtype, and UNSUPPORTED where there is
//! none; the Python module's decision between the champion, the differentiable call and
//! torch's fallback. No GPU and no NVRTC: the export is a manifest and empty kernel files.

use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::{Dtype, Problem};
use evo_runtime::export::{
    BackwardChampionEntry, ChampionEntry, KernelEntry, Manifest, MANIFEST_FILE, MANIFEST_FORMAT,
};
use evo_runtime::{Buffers, BwdBuffers, Champions, Export, RuntimeError};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The stdout of `script` run by python3 with the export's Python module importable and
/// the export folder `export` as its argument; the script must succeed.
fn python_stdout(script: &str, export: &Path) -> String {
    python_stdout_of(script, &[export])
}

/// [`python_stdout`] with the export folders `exports` as its arguments, in order.
fn python_stdout_of(script: &str, exports: &[&Path]) -> String {
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

/// (problem, the class it must get, why): each worked out from the table's classes.
const PICKS: &[(&str, &str, &str)] = &[
    // Every class's own shape, in the other dtype too: itself.
    ("1,8,512,512,64,f16", "b1-h8-l512-d64", "own"),
    ("1,8,512,512,64,bf16,causal", "b1-h8-l512-d64-causal", "own"),
    (
        "4,16,1024,1024,64,f16,causal",
        "b4-h16-l1024-d64-causal",
        "own",
    ),
    ("4,16,1024,1024,64,f16", "b4-h16-l1024-d64", "own"),
    (
        "2,16,4096,4096,128,f16,causal",
        "b2-h16-l4096-d128-causal",
        "own",
    ),
    ("2,16,4096,4096,128,bf16", "b2-h16-l4096-d128", "own"),
    ("1,16,8192,8192,128,f16", "b1-h16-l8192-d128", "own"),
    (
        "16,32,1,8192,128,f16,causal=br,kv=1",
        "b16-h32kv1-lq1-lk8192-d128-causal-br",
        "own",
    ),
    (
        "16,32,1,8192,128,f16,causal=br,kv=8",
        "b16-h32kv8-lq1-lk8192-d128-causal-br",
        "own",
    ),
    (
        "1,32,4096,4096,96,f16,causal",
        "b1-h32-l4096-d96-causal",
        "own",
    ),
    (
        "1,32,4096,4096,128,f16,causal,kv=8",
        "b1-h32kv8-l4096-d128-causal",
        "own",
    ),
    (
        "1,16,4096,4096,256,f16,causal,kv=8",
        "b1-h16kv8-l4096-d256-causal",
        "own",
    ),
    (
        "1,32,8192,8192,128,f16,causal,kv=8,window=4096:",
        "b1-h32kv8-l8192-d128-causal-wl4096",
        "own",
    ),
    // Between classes.
    (
        "1,8,300,700,64,f16",
        "b1-h8-l512-d64",
        "2^20.7: nearer 2^21 than 2^26",
    ),
    (
        "8,16,1024,1024,64,bf16,causal",
        "b4-h16-l1024-d64-causal",
        "2^27: nearer 2^26 than 2^21",
    ),
    (
        "1,1,1,1,128,f16",
        "b2-h16-l4096-d128",
        "plain D128: 2^29 nearer than 2^30",
    ),
    (
        "4,16,8192,8192,128,f16",
        "b1-h16-l8192-d128",
        "2^32: nearer 2^30 than 2^29",
    ),
    (
        "1,16,4096,4096,128,f16,causal",
        "b2-h16-l4096-d128-causal",
        "the one causal MHA D128",
    ),
    (
        "1,32,4096,4096,128,f16,causal,kv=4",
        "b1-h32kv8-l4096-d128-causal",
        "grouped causal: 2^29",
    ),
    (
        "8,32,1,4096,128,f16,causal=br,kv=8",
        "b16-h32kv8-lq1-lk8192-d128-causal-br",
        "decode tie: group 4",
    ),
    (
        "8,32,1,4096,128,f16,causal=br,kv=1",
        "b16-h32kv1-lq1-lk8192-d128-causal-br",
        "decode tie: group 32",
    ),
    (
        "16,32,1,8192,128,f16,kv=8",
        "b2-h16-l4096-d128",
        "no grouped non-causal: same mask, 2^29",
    ),
    (
        "1,32,8192,8192,128,f16,kv=8,window=4096:",
        "b1-h16-l8192-d128",
        "no such kind: same mask, 2^30",
    ),
    (
        "1,32,16384,16384,128,bf16,causal,kv=8,window=1024:",
        "b1-h32kv8-l8192-d128-causal-wl4096",
        "kind",
    ),
    (
        "1,16,4096,4096,128,f16,causal,window=256:",
        "b2-h16-l4096-d128-causal",
        "causal tie: group 1",
    ),
    (
        "1,32,4096,4096,96,f16",
        "b1-h32-l4096-d96-causal",
        "the only D96 class",
    ),
    (
        "1,16,2048,2048,256,f16,causal",
        "b1-h16kv8-l4096-d256-causal",
        "the only D256 class",
    ),
];

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
fn fake_export(out: &Path) -> DispatchTable {
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

#[test]
fn the_runtime_runs_the_champion_the_rule_gives_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let table = fake_export(dir.path());
    // Every class is among the picks: a class added to the table needs its own line.
    for class in &table.classes {
        let own = class.problem().unwrap();
        let picked = PICKS.iter().any(|(spec, want, _)| {
            let mut p: Problem = spec.parse().unwrap();
            p.dtype = own.dtype;
            *want == class.name && p == own
        });
        assert!(
            picked,
            "class `{}` has no pick on its own shape",
            class.name
        );
    }
    let export = Export::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    for (spec, want, why) in PICKS {
        let p: Problem = spec.parse().unwrap();
        let (entry, kernel) = export.choose(&p).unwrap_or_else(|e| panic!("{spec}: {e}"));
        if entry.class != *want || kernel.dtype != p.dtype {
            wrong.push(format!(
                "{spec}: runtime ran `{}` ({}), expected `{want}` ({why})",
                entry.class, kernel.dtype
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A call that asks for the forward's log-sum-exp runs the same champion's lse twin
/// (kernels/ABI.md, "The log-sum-exp output"); a missing twin file is named when the
/// export opens; an export written before the twins (no `lse_kernels`) still opens and
/// serves the plain calls, and refuses the lse calls as unsupported, saying to export
/// again.
#[test]
fn lse_calls_run_the_twin_and_an_export_without_twins_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    fake_export(dir.path());
    let export = Export::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    for spec in ["1,8,512,512,64,f16", "2,16,4096,4096,128,bf16,causal"] {
        let p: Problem = spec.parse().unwrap();
        let (entry, plain) = export.choose(&p).unwrap();
        let (twin_entry, twin) = export.choose_lse(&p).unwrap();
        assert_eq!(twin_entry.class, entry.class, "{spec}");
        assert_eq!((plain.dtype, twin.dtype), (p.dtype, p.dtype));
        assert_eq!(
            twin.ptx,
            format!(
                "kernels/{}.ptx",
                KernelEntry::lse_file_stem(&entry.class, p.dtype)
            )
        );
        assert_ne!(plain.ptx, twin.ptx);
    }
    let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
    let twin_path = dir.path().join(&export.choose_lse(&p).unwrap().1.ptx);
    std::fs::rename(&twin_path, dir.path().join("aside")).unwrap();
    let e = Export::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("lse twin of") && e.contains("is missing"), "{e}");
    std::fs::rename(dir.path().join("aside"), &twin_path).unwrap();

    // A manifest written before the twins.
    let path = dir.path().join(MANIFEST_FILE);
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for c in json["champions"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("lse_kernels");
    }
    std::fs::write(&path, json.to_string()).unwrap();
    let old = Export::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(old.choose(&p).is_ok());
    let e = old.choose_lse(&p).unwrap_err();
    assert!(
        matches!(e, RuntimeError::Unsupported(_))
            && e.to_string().contains("has no lse twin")
            && e.to_string().contains("export the champions again"),
        "{e}"
    );
    // Through the runtime's call: refused before the pointers or a GPU are looked at.
    let champions = Champions::open(dir.path()).unwrap();
    // SAFETY: the call is refused before any pointer or stream is used.
    let e = unsafe {
        champions.forward_with_lse(&p, &Buffers::default(), Some(0), std::ptr::null_mut())
    }
    .unwrap_err();
    assert!(matches!(e, RuntimeError::Unsupported(_)), "{e}");
    // The Python module runs such an export's forward, and falls back for the gradient
    // (the script's both exports are this one).
    let got: serde_json::Value =
        serde_json::from_str(&python_stdout_of(DECIDE_SCRIPT, &[dir.path(), dir.path()])).unwrap();
    assert_eq!(got["forward"][0], "forward");
    assert_eq!(got["autograd"][0], "fallback");
    assert_eq!(got["autograd"][1], "backward");
    let why = got["autograd"][2].as_str().unwrap_or_default();
    assert!(why.contains("has no lse twin"), "{why}");
}

/// The same picks from the export's Python module, without torch; and none for a head
/// dim no class has.
#[test]
fn the_python_module_picks_the_same_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    fake_export(dir.path());
    let problems: Vec<serde_json::Value> = PICKS
        .iter()
        .map(|(spec, _, _)| {
            let p: Problem = spec.parse().unwrap();
            evo_runtime::export::python_choose_args(&p)
        })
        .collect();
    let script = format!(
        "import json, sys\nfrom evo_attention.dispatch import Manifest\n\
         m = Manifest(sys.argv[1])\n\
         out = [(m.choose(*p) or {{}}).get('class') for p in json.loads({:?})]\n\
         out.append(m.choose(1, 8, 512, 512, 80, False))\n\
         assert 'torch' not in sys.modules\nprint(json.dumps(out))",
        serde_json::to_string(&problems).unwrap()
    );
    let got: Vec<Option<String>> =
        serde_json::from_str(&python_stdout(&script, dir.path())).unwrap();
    let (none, got) = got.split_last().unwrap();
    assert_eq!(none, &None, "no class has head dim 80");
    let wrong: Vec<String> = PICKS
        .iter()
        .zip(got)
        .filter(|((_, want, _), got)| got.as_deref() != Some(*want))
        .map(|((spec, want, why), got)| {
            format!("{spec}: python picked {got:?}, expected `{want}` ({why})")
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Writes the export's manifest again with `edit` applied to its JSON.
fn edit_manifest(
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
fn drop_backward(export: &Path, d: u32) {
    edit_manifest(export, |m| {
        let backward = m["backward"].as_array_mut().unwrap();
        let before = backward.len();
        backward.retain(|b| b["head_dim"] != d);
        assert_eq!(backward.len(), before - 1, "one backward entry of D{d}");
    });
}

/// The backward by head dim and dtype: the recorded table's D64, D96, D128 and D256 in
/// both dtypes; a head dim the export has no backward entry for (D256's dropped from the
/// manifest) and an export written before the backward are UNSUPPORTED with a message,
/// before any GPU is touched.
#[test]
fn the_backward_is_chosen_by_head_dim_and_a_missing_one_is_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let table = fake_export(dir.path());
    assert_eq!(
        table
            .backward
            .iter()
            .map(|b| b.head_dim)
            .collect::<Vec<_>>(),
        [64, 96, 128, 256],
        "the recorded table's backward entries"
    );
    let export = Export::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    for d in [64, 96, 128, 256] {
        for dtype in Dtype::ALL {
            let p: Problem = format!("2,8,300,300,{d},{dtype},causal,kv=2")
                .parse()
                .unwrap();
            let (entry, kernel) = export
                .choose_backward(&p)
                .unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!((entry.head_dim, kernel.dtype), (d, dtype));
            // D64 and D128 were searched from fa3-bwd, D96 is their champion; D256 has
            // a search of its own (over every valid D256 backward genome).
            let from = if d == 256 { "search" } else { "fa3-bwd" };
            assert!(entry.origin.contains(from), "D{d}: {}", entry.origin);
        }
    }

    // An export without D256's backward entry: UNSUPPORTED, naming what it covers.
    drop_backward(dir.path(), 256);
    let export = Export::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let d256: Problem = "1,16,4096,4096,256,bf16,causal,kv=8".parse().unwrap();
    assert!(
        export.choose(&d256).is_ok(),
        "D256 keeps its forward champion"
    );
    let e = export.choose_backward(&d256).unwrap_err();
    assert!(
        matches!(e, RuntimeError::Unsupported(_))
            && e.to_string()
                .contains("no backward kernel for head dim 256 in bf16")
            && e.to_string().contains("(it has D64, D96, D128)"),
        "{e}"
    );
    // Through the runtime's call: refused before the pointers or a GPU are looked at.
    let champions = Champions::open(dir.path()).unwrap();
    // SAFETY: the call is refused before any pointer or stream is used.
    let e = unsafe { champions.backward(&d256, &BwdBuffers::default(), std::ptr::null_mut()) }
        .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Unsupported(_))
            && e.to_string()
                .contains("no backward kernel for head dim 256"),
        "{e}"
    );

    // A manifest written before the backward (no `backward` key) still opens; it has none.
    edit_manifest(dir.path(), |m| {
        m.remove("backward");
    });
    let old = Export::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
    assert!(old.manifest().backward.is_empty());
    let e = old.choose_backward(&p).unwrap_err().to_string();
    assert!(e.contains("it has none"), "{e}");
}

/// The Python module's decision, without torch: the champion's forward without grad,
/// the differentiable call under autograd where a backward kernel covers the head dim
/// and dtype, torch's fallback (with the reason) where none does (the second export,
/// the first without D256's backward entry) or the call is not covered at all, and the
/// strict call refusing tensors that require grad.
const DECIDE_SCRIPT: &str = r#"
import json, sys
import evo_attention
from evo_attention.dispatch import Manifest
assert "torch" not in sys.modules, "importing evo_attention imported torch"
m = Manifest(sys.argv[1])
no_d256 = Manifest(sys.argv[2])

def call(d=64, dtype="torch.bfloat16", grad=False, cuda=True, contiguous=True, h=8, hkv=8, gqa=False):
    return {
        "devices": ["cuda:0"] * 3 if cuda else ["cpu"] * 3,
        "cuda": cuda,
        "dtypes": [dtype] * 3,
        "shapes": [(2, h, 1024, d), (2, hkv, 1024, d), (2, hkv, 1024, d)],
        "contiguous": contiguous,
        "needs_grad": grad,
        "capability": (9, 0),
        "device_name": "NVIDIA H100 80GB HBM3",
        "is_causal": True,
        "enable_gqa": gqa,
    }

cases = {
    "forward": evo_attention._decide(m, call()),
    "autograd": evo_attention._decide(m, call(grad=True)),
    "autograd_gqa_f16_d128": evo_attention._decide(m, call(d=128, dtype="torch.float16", grad=True, h=16, hkv=4, gqa=True)),
    "autograd_d256": evo_attention._decide(m, call(d=256, grad=True)),
    "autograd_d256_f16": evo_attention._decide(m, call(d=256, dtype="torch.float16", grad=True)),
    "asked_grad_d256": evo_attention._decide(m, call(d=256), grad="yes"),
    "forward_d256": evo_attention._decide(m, call(d=256)),
    "no_backward_d256": evo_attention._decide(no_d256, call(d=256, grad=True)),
    "no_backward_forward_d256": evo_attention._decide(no_d256, call(d=256)),
    "no_backward_asked_grad_d256": evo_attention._decide(no_d256, call(d=256), grad="yes"),
    "no_backward_d64": evo_attention._decide(no_d256, call(d=64, grad=True)),
    "asked_no_grad": evo_attention._decide(m, call(grad=True), grad="no"),
    "strict_refuses_grad": evo_attention._decide(m, call(grad=True), grad="refuse"),
    "cpu": evo_attention._decide(lambda: 1 / 0, call(cuda=False, grad=True)),
    "float32": evo_attention._decide(m, call(dtype="torch.float32", grad=True)),
    "head_dim_80": evo_attention._decide(m, call(d=80, grad=True)),
    "sm_80": evo_attention._decide(m, dict(call(grad=True), capability=(8, 0), device_name="A100")),
}
print(json.dumps(cases))
"#;

#[test]
fn the_python_module_decides_between_champion_autograd_and_fallback() {
    let dir = tempfile::tempdir().unwrap();
    fake_export(dir.path());
    let no_d256 = tempfile::tempdir().unwrap();
    fake_export(no_d256.path());
    drop_backward(no_d256.path(), 256);
    let got: serde_json::Value = serde_json::from_str(&python_stdout_of(
        DECIDE_SCRIPT,
        &[dir.path(), no_d256.path()],
    ))
    .unwrap();
    let mode = |case: &str| got[case][0].as_str().unwrap_or_default().to_string();
    let kind = |case: &str| got[case][1].as_str().unwrap_or_default().to_string();
    let message = |case: &str| got[case][2].as_str().unwrap_or_default().to_string();
    assert_eq!(mode("forward"), "forward");
    assert_eq!(mode("autograd"), "autograd");
    assert_eq!(mode("autograd_gqa_f16_d128"), "autograd");
    // The recorded table has a backward at D256 too.
    for case in ["autograd_d256", "autograd_d256_f16", "asked_grad_d256"] {
        assert_eq!(mode(case), "autograd", "{case}: {}", message(case));
    }
    assert_eq!(mode("asked_no_grad"), "forward");
    // Without a head dim's backward entry: its forward still runs the champion, its
    // gradient falls back to torch saying what the export covers; the others are kept.
    for case in ["forward_d256", "no_backward_forward_d256"] {
        assert_eq!(mode(case), "forward", "{case}: D256 has a forward champion");
    }
    assert_eq!(mode("no_backward_d64"), "autograd");
    for case in ["no_backward_d256", "no_backward_asked_grad_d256"] {
        assert_eq!(
            (mode(case), kind(case)),
            ("fallback".into(), "backward".into()),
            "{case}"
        );
        assert!(
            message(case).contains("head dim 256 in bf16")
                && message(case).contains(
                    "backward kernels cover D64 (bf16, f16), D96 (bf16, f16), D128 (bf16, f16)"
                )
                && !message(case).contains("D256 ("),
            "{}",
            message(case)
        );
    }
    assert_eq!(kind("strict_refuses_grad"), "autograd");
    // A CPU call is decided without reading the manifest (the function would raise).
    assert_eq!(kind("cpu"), "device");
    assert_eq!(kind("float32"), "dtype");
    assert_eq!(kind("head_dim_80"), "head_dim");
    assert_eq!(kind("sm_80"), "gpu");
}
