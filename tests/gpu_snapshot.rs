//! `evo snapshot` on a GPU (opt-in: `cargo test --features gpu --test integration
//! gpu_snapshot`, part of `just gpu-test`): a snapshot of the recorded champions'
//! export checks identical on the GPU that recorded it, still passes when a hash no
//! longer matches but the values do, and fails, naming the problem, row and value,
//! when a chunk's hash and one of its values are moved (a chunk whose hash matches is
//! identical, so its values are not looked at). Needs NVRTC.

use crate::util::{evo, repo_root, stderr, stdout};
use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use std::path::Path;

fn evo_ok(args: &[&str]) -> String {
    let o = evo(args, &[]);
    assert!(
        o.status.success(),
        "evo {args:?}:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    println!("{}", stdout(&o));
    stdout(&o)
}

/// The snapshot at `from` with `edit` applied, written to `to`.
fn edit(from: &Path, to: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(to, v.to_string()).unwrap();
}

#[test]
fn gpu_snapshot_records_checks_and_catches_a_moved_value() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let out = out.to_str().unwrap();
    evo_ok(&[
        "export",
        out,
        "--champions",
        "genomes/champions/h100",
        "--cubin",
    ]);
    let file = dir.path().join("s.json");
    let file_arg = file.to_str().unwrap();
    // Every class of the table, in f16 and bf16.
    let n = 2 * DispatchTable::load(
        &repo_root()
            .join("genomes/champions/h100")
            .join(DISPATCH_FILE),
    )
    .unwrap()
    .classes
    .len();
    let o = evo_ok(&["snapshot", file_arg, "--export", out]);
    assert!(o.contains(&format!("recorded {n} outputs")), "{o}");

    // The same GPU, driver and kernels: every row bit for bit.
    let o = evo_ok(&["snapshot", file_arg, "--export", out, "--check"]);
    assert!(
        o.contains("same GPU, drivers, evo and export")
            && o.contains(&format!(
                "all {n} outputs within tolerance ({n} identical bit for bit)"
            )),
        "{o}"
    );

    // A chunk whose hash no longer matches is judged by its values, which still do.
    let rehashed = dir.path().join("rehashed.json");
    edit(&file, &rehashed, |v| {
        v["entries"][0]["output"]["chunks"][0]["hash"] = "0".repeat(64).into();
    });
    let o = evo_ok(&[
        "snapshot",
        rehashed.to_str().unwrap(),
        "--export",
        out,
        "--check",
    ]);
    assert!(
        o.contains(&format!("({} identical bit for bit)", n - 1)),
        "{o}"
    );

    // A chunk recorded from another output (its hash and a sampled value moved by 1):
    // out of tolerance, named.
    let moved = dir.path().join("moved.json");
    let (mut problem, mut row) = (String::new(), 0);
    edit(&file, &moved, |v| {
        let entry = &mut v["entries"][3];
        problem = entry["problem"].as_str().unwrap().to_string();
        let chunk = &mut entry["output"]["chunks"][5];
        chunk["hash"] = "0".repeat(64).into();
        row = chunk["sample_row"].as_u64().unwrap();
        let x = chunk["samples"][2].as_f64().unwrap();
        chunk["samples"][2] = (x + 1.0).into();
    });
    let o = evo(
        &[
            "snapshot",
            moved.to_str().unwrap(),
            "--export",
            out,
            "--check",
        ],
        &[],
    );
    println!("{}", stdout(&o));
    let label = problem.parse::<evo_genome::Problem>().unwrap().label();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!("1 of {n} outputs out of tolerance"))
            && e.contains(&format!("the first: {label}, row {row} "))
            && e.contains(" col "),
        "{e}"
    );
    assert!(
        stdout(&o).contains(&format!("{label}: out of tolerance: row {row} ")),
        "{}",
        stdout(&o)
    );
}
