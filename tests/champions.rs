//! The per-shape champions (genomes/champions/h100): each genome and its defines as
//! snapshots, the dispatch table's claims checked against the committed bench and
//! searches, and `evo dispatch` / `evo champions` end to end (CPU).

use crate::util::{evo, evo_command, repo_root, stderr, stdout};
use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::{Dtype, GenomeFile};
use evo_lineage::Lineage;

const DIR: &str = "genomes/champions/h100";

fn table() -> DispatchTable {
    DispatchTable::load(&repo_root().join(DIR).join(DISPATCH_FILE)).expect("committed table")
}

#[test]
fn each_champion_genome_and_its_defines() {
    for class in table().classes {
        let file = GenomeFile::load(&repo_root().join(DIR).join(&class.champion)).unwrap();
        let p = class.problem().unwrap();
        let mut text = file.to_toml_string();
        for dtype in [Dtype::F16, Dtype::Bf16] {
            text += &format!("\n# defines at D{} {dtype}\n", p.head_dim);
            text += &evo_codegen::defines(&file.genes, p.head_dim, dtype).to_string();
            text += "\n";
        }
        insta::assert_snapshot!(format!("champion_{}", class.name.replace('-', "_")), text);
    }
}

/// What the table says is what was measured: each champion is its search's champion,
/// and its µs and the cuDNN µs are the committed bench's rows of the same run.
#[test]
fn the_table_is_the_searches_and_the_bench() {
    let table = table();
    assert_eq!(
        table.classes.len(),
        13,
        "the anchors shapes, causal and not, B1 H16 L8192, and the models suite's six rows"
    );
    for class in &table.classes {
        let file = GenomeFile::load(&repo_root().join(DIR).join(&class.champion)).unwrap();
        let lineage = Lineage::load(&repo_root().join(&class.experiment).join("lineage.json"))
            .unwrap_or_else(|e| panic!("{}: {e}", class.experiment));
        let champion = lineage.champion().expect("a champion");
        assert_eq!(champion.genome.id(), file.genes.id(), "{}", class.name);
        assert_eq!(
            lineage.meta.objective,
            class.problem().unwrap().label(),
            "{}: searched on another shape",
            class.name
        );
        let bench = class.bench.as_deref().expect("benched");
        let json = bench.split(' ').next().unwrap();
        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(repo_root().join(json)).unwrap())
                .unwrap();
        let shape = class.problem().unwrap().label();
        let us = |kernel: &str| {
            rows.iter()
                .find(|r| {
                    r["kernel"] == kernel && r["shape"] == shape.as_str() && r["verdict"] == "timed"
                })
                .and_then(|r| r["median_us"].as_f64())
        };
        assert_eq!(
            us(&format!("champion {}", class.name)),
            class.median_us,
            "{}",
            class.name
        );
        assert_eq!(us("sdpa-cudnn"), class.cudnn_us, "{}", class.name);
        // The record ran with --cold-l2: the cold pair is that run's cold rows.
        assert_eq!(
            us(&format!("champion {} (cold L2)", class.name)),
            class.cold_us,
            "{}",
            class.name
        );
        assert_eq!(
            us("sdpa-cudnn (cold L2)"),
            class.cudnn_cold_us,
            "{}",
            class.name
        );
        assert!(class.cold_us.is_some() && class.cudnn_cold_us.is_some());
        // The figures are the champion file's genome's, as the record's row says.
        let row = rows
            .iter()
            .find(|r| r["kernel"] == format!("champion {}", class.name).as_str())
            .unwrap();
        assert_eq!(class.genome_id.as_deref(), row["genome_id"].as_str());
        assert_eq!(
            class.genome_id.as_deref(),
            Some(file.genes.id().to_string().as_str())
        );
        // Every baseline the run timed on the shape is in the table, with its figures:
        // a ratio is against the fastest of them, so none may be left out.
        let mut backends: Vec<String> = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r["shape"] == shape.as_str() && r["verdict"] == "timed")
        {
            let k = r["kernel"].as_str().unwrap().trim_end_matches(" (cold L2)");
            if !k.starts_with("champion ") && !backends.iter().any(|b| b == k) {
                backends.push(k.to_string());
            }
        }
        let recorded: Vec<&str> = class.baselines.iter().map(|b| b.backend.as_str()).collect();
        assert_eq!(recorded, backends, "{}", class.name);
        for b in &class.baselines {
            assert_eq!(b.us, us(&b.backend), "{} {}", class.name, b.backend);
            assert_eq!(
                b.cold_us,
                us(&format!("{} (cold L2)", b.backend)),
                "{} {}",
                class.name,
                b.backend
            );
        }
        // The champion's header says what the table says.
        let text = std::fs::read_to_string(repo_root().join(DIR).join(&class.champion)).unwrap();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{}\n", l.trim_start_matches('#').trim_start()))
            .collect();
        assert_eq!(
            header,
            class.champion_header(&table.device),
            "{}",
            class.name
        );
    }
    // The two rows whose cuDNN figure is not the fastest baseline: the grouped decode
    // (flash replays faster; cold, cuDNN is at parity) and the window (FlexAttention).
    let by = |name: &str| table.classes.iter().find(|c| c.name == name).unwrap();
    let decode = by("b16-h32kv8-lq1-lk8192-d128-causal-br");
    let warm = decode.comparison(false).unwrap();
    assert_eq!(
        (warm.backend.as_str(), format!("{:.3}", warm.ratio).as_str()),
        ("sdpa-flash", "1.014")
    );
    let cold = decode.comparison(true).unwrap();
    assert_eq!(
        (cold.backend.as_str(), format!("{:.2}", cold.ratio).as_str()),
        ("sdpa-cudnn", "1.00")
    );
    let window = by("b1-h32kv8-l8192-d128-causal-wl4096")
        .comparison(false)
        .unwrap();
    assert_eq!(
        (
            window.backend.as_str(),
            format!("{:.2}", window.ratio).as_str()
        ),
        ("sdpa-flex", "1.53")
    );
}

/// `evo dispatch SPEC | head -0`: the reader is gone before evo prints. It must end as the
/// other tools in a pipe do (killed by SIGPIPE, or done), never with Rust's panic.
#[cfg(unix)]
#[test]
fn dispatch_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = evo_command(&["dispatch", "2,8,2048,2048,128,bf16,causal"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the evo binary runs");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        o.status.success() || o.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {err}",
        o.status
    );
}

#[test]
fn dispatch_names_the_champion_and_the_rule() {
    let o = evo(&["dispatch", "2,8,2048,2048,128,bf16,causal"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("-> b2-h16-l4096-d128-causal"), "{out}");
    assert!(
        out.contains("nearest class of head dim 128, causal"),
        "{out}"
    );
    let o = evo(&["dispatch", "1,8,512,512,64,f16"], &[]);
    let out = stdout(&o);
    assert!(
        out.contains("exactly the class's shape")
            && out.contains("against sdpa-cudnn 9.79 µs: 1.52x (the fastest of 4 baselines)"),
        "{out}"
    );
    // The record ran with --cold-l2: the cold comparison stands beside the replayed one.
    assert!(
        out.contains("cold L2: 8.24 µs against sdpa-cudnn 11.07 µs: 1.34x"),
        "{out}"
    );
    // The grouped decode's ratio is against flash, the fastest backend that ran it.
    let o = evo(&["dispatch", "16,32,1,8192,128,f16,causal=br,kv=8"], &[]);
    let out = stdout(&o);
    assert!(
        out.contains("179.50 µs against sdpa-flash 181.96 µs: 1.01x") && !out.contains("1.17x"),
        "{out}"
    );
    let o = evo(&["dispatch", "1,8,512,512,80,f16"], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("64, 96, 128 or 256"), "{}", stderr(&o));
    // A grouped decode goes to the grouped decode class, a multi-head one of the same
    // head dim to a multi-head class.
    let o = evo(&["dispatch", "8,32,1,4096,128,bf16,causal=br,kv=8"], &[]);
    let out = stdout(&o);
    assert!(
        out.contains("-> b16-h32kv8-lq1-lk8192-d128-causal-br"),
        "{out}"
    );
    let o = evo(&["dispatch", "8,32,1,4096,128,bf16,causal=br"], &[]);
    let out = stdout(&o);
    assert!(
        out.contains("-> b2-h16-l4096-d128-causal") && !out.contains("-> b16-"),
        "{out}"
    );
    // A head dim the problem states but no class of a table covers.
    let dir = tempfile::tempdir().unwrap();
    let mut only_d64 = table();
    only_d64
        .classes
        .retain(|c| c.problem().unwrap().head_dim.get() == 64);
    std::fs::write(
        dir.path().join(DISPATCH_FILE),
        only_d64.to_toml_string("D64 classes only"),
    )
    .unwrap();
    for c in &only_d64.classes {
        std::fs::copy(
            repo_root().join(DIR).join(&c.champion),
            dir.path().join(&c.champion),
        )
        .unwrap();
    }
    let o = evo(
        &[
            "dispatch",
            "1,8,512,512,96,f16",
            "--champions",
            &dir.path().display().to_string(),
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no class has head dim 96") && stderr(&o).contains("evo evolve"),
        "{}",
        stderr(&o)
    );
    let o = evo(
        &[
            "dispatch",
            "1,8,512,512,64,f16",
            "--champions",
            "genomes/champions/none",
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("genomes/champions/none/dispatch.toml") && err.contains("evo champions"),
        "{err}"
    );
}

#[test]
fn champions_are_rebuilt_from_the_searches() {
    let table = table();
    let out = std::env::temp_dir().join(format!("evo-champions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec!["champions".to_string()];
    let mut seen = Vec::new();
    for c in &table.classes {
        if !seen.contains(&c.experiment) {
            seen.push(c.experiment.clone());
            args.push(c.experiment.clone());
        }
    }
    args.push("--out".into());
    args.push(out.display().to_string());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = evo(&argv, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rebuilt = DispatchTable::load(&out.join(DISPATCH_FILE)).unwrap();
    assert_eq!(rebuilt.classes.len(), table.classes.len());
    for c in &table.classes {
        let r = rebuilt
            .classes
            .iter()
            .find(|r| r.name == c.name)
            .expect("class rebuilt");
        let (a, b) = (
            GenomeFile::load(&out.join(&r.champion)).unwrap(),
            GenomeFile::load(&repo_root().join(DIR).join(&c.champion)).unwrap(),
        );
        assert_eq!(a.genes.id(), b.genes.id(), "{}", c.name);
        assert!(r.median_us.is_none(), "figures come only from a bench");
    }
    // A suite search has no one shape.
    let o = evo(
        &[
            "champions",
            "experiments/2026-11-22-h100-evolve-anchors-suite",
            "--out",
            &out.display().to_string(),
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("a suite search has no one shape"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// The recorded two-family landscape contains the kernels a user knows at the seed shape:
/// FA2 and FA3 as genomes, v6a, the Ampere champion and this shape's per-shape champion,
/// so a replayed search can reach each of them. The per-shape champion merges its splits
/// in a cluster (`cluster_combine`, a gene added after the landscape was measured): the
/// landscape holds its kernel with the combine kernel instead, one gene away.
#[test]
fn the_two_family_landscape_contains_the_known_kernels_of_its_shape() {
    let dir = repo_root().join("experiments/2026-11-23-h100-landscape");
    let plan: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("plan.toml")).unwrap()).unwrap();
    let sub: evo_mutator::SubSpace = plan["subspace"].clone().try_into().unwrap();
    let space =
        evo_mutator::SearchSpace::sub(&sub, evo_genome::HeadDim::D64, evo_genome::Target::Sm90)
            .unwrap();
    assert!(space.valid_points().unwrap().len() >= 10_000);
    for file in [
        "genomes/fa2.toml",
        "genomes/fa3.toml",
        "genomes/v6a.toml",
        "genomes/champion-h100-seed.toml",
        "genomes/champions/h100/b1-h8-l512-d64.toml",
    ] {
        let g = GenomeFile::load(&repo_root().join(file)).unwrap().genes;
        let g = evo_genome::Genome {
            cluster_combine: evo_genome::Switch::Off,
            ..g
        };
        assert!(
            space.admits(&g),
            "{file} ({}) is outside the landscape's sub-space",
            g.summary()
        );
    }
}
