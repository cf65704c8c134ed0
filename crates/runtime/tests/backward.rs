//! What the runtime and the export's Python module run for the backward, on the recorded
//! H100 table: the forward's lse twin a gradient needs, the backward kernel of a head dim
//! and dtype, UNSUPPORTED where there is none, and the Python module's decision between
//! the champion, the differentiable call and torch's fallback. No GPU and no NVRTC: the
//! export is a manifest and empty kernel files (tests/fake_export).

mod fake_export;

use evo_genome::{Dtype, Problem};
use evo_runtime::export::KernelEntry;
use evo_runtime::{Buffers, BwdBuffers, Champions, Export, RuntimeError};
use fake_export::{drop_backward, edit_manifest, fake_export, python_stdout_of};

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
    edit_manifest(dir.path(), |m| {
        for c in m["champions"].as_array_mut().unwrap() {
            c.as_object_mut().unwrap().remove("lse_kernels");
        }
    });
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
