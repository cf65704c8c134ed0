//! Which champion the runtime runs for a problem, against picks worked out by hand from
//! the rule dispatch.toml states (head dim; then the same kind, else the same mask; then
//! the nearest work; ties to the nearest key length, then the nearest group), on the
//! recorded H100 table: the Rust runtime (`Export::choose`, what the C ABI runs) and the
//! export's Python module (`evo_attention.dispatch`, what `sdpa` runs) must both give
//! them. The backward's choices are tests/backward.rs's. No GPU and no NVRTC: the export
//! is a manifest and empty kernel files (tests/fake_export).

mod fake_export;

use evo_genome::Problem;
use evo_runtime::Export;
use fake_export::{fake_export, python_stdout_of};

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
        serde_json::from_str(&python_stdout_of(&script, &[dir.path()])).unwrap();
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
