use crate::*;
use evo_genome::{Gene, Genome, GenomeFile};
use evo_record::{Evaluation, Status};
use std::path::Path;

fn ok(genome: Genome, us: f64, device: &str) -> Evaluation {
    Evaluation {
        genome_id: genome.id(),
        genome,
        device: device.into(),
        device_index: None,
        status: Status::Ok,
        score_us: Some(us),
        timings: Vec::new(),
        resources: None,
        detail: String::new(),
        gates: Vec::new(),
    }
}

fn mutate(g: &Genome, gene: Gene, index: usize) -> (Genome, Operator) {
    let child = g.with_allele(gene, index);
    let op = Operator::Mutate {
        gene,
        from: g.allele_label(gene),
        to: child.allele_label(gene),
    };
    (child, op)
}

fn node(
    genome: Genome,
    generation: u32,
    operators: Vec<Operator>,
    eval: Option<Evaluation>,
) -> Node {
    Node {
        id: genome.id(),
        genome,
        name: None,
        generation,
        operators,
        evaluation: eval,
        island: None,
    }
}

/// root (100 µs) → a: warps 4→8 (80 µs) → b: stages 1→2 (50 µs, champion)
///               → c: warps 4→2 (green failed)
/// a × c crossover → d (90 µs)
fn hand_built(device: &str, objective: &str) -> Lineage {
    let mut l = Lineage::new(LineageMeta {
        title: "hand".into(),
        device: device.into(),
        objective: objective.into(),
        strategy: "evolutionary".into(),
        seed: Some(7),
    });
    let root = Genome::baseline();
    l.add(
        node(
            root,
            0,
            vec![Operator::Random],
            Some(ok(root, 100.0, device)),
        ),
        &[],
    )
    .unwrap();
    let (a, op_a) = mutate(&root, Gene::Warps, 3);
    l.add(
        node(a, 1, vec![op_a], Some(ok(a, 80.0, device))),
        &[root.id()],
    )
    .unwrap();
    let (c, op_c) = mutate(&root, Gene::Warps, 1);
    let failed = Evaluation::failed(c, device, Status::GreenFailed, "row 3 off by 0.5");
    l.add(node(c, 1, vec![op_c], Some(failed)), &[root.id()])
        .unwrap();
    let (b, op_b) = mutate(&a, Gene::Stages, 1);
    l.add(node(b, 2, vec![op_b], Some(ok(b, 50.0, device))), &[a.id()])
        .unwrap();
    let d = a.with_allele(Gene::VecBytes, 2);
    l.add(
        node(
            d,
            2,
            vec![Operator::Crossover { other: c.id() }],
            Some(ok(d, 90.0, device)),
        ),
        &[a.id(), c.id()],
    )
    .unwrap();
    l
}

#[test]
fn json_round_trip_is_exact() {
    let l = hand_built("NVIDIA H100 80GB HBM3", "B1 H8 L512 D64 f16");
    let text = l.to_json();
    let back = Lineage::from_json(&text, Path::new("lineage.json")).unwrap();
    assert_eq!(back.to_json(), text);
    assert_eq!(back.len(), 5);
    assert_eq!(back.meta, l.meta);
    let d = back.nodes().last().unwrap();
    assert_eq!(
        back.primary_parent(&d.id).unwrap().genome,
        Genome::baseline().with_allele(Gene::Warps, 3)
    );
}

#[test]
fn save_is_atomic_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lineage.json");
    let l = hand_built("dev", "obj");
    l.save(&path).unwrap();
    l.save(&path).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["lineage.json".to_string()],
        "no temporary file left behind"
    );
    assert_eq!(Lineage::load(&path).unwrap().to_json(), l.to_json());
}

#[test]
fn a_gzipped_lineage_loads_when_the_plain_file_is_absent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lineage.json");
    let l = hand_built("dev", "obj");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.path().join("lineage.json.gz")).unwrap(),
        flate2::Compression::default(),
    );
    std::io::Write::write_all(&mut gz, l.to_json().as_bytes()).unwrap();
    gz.finish().unwrap();
    assert_eq!(Lineage::load(&path).unwrap().to_json(), l.to_json());
    // A plain file beside it wins; a corrupt archive is an error naming it.
    std::fs::write(dir.path().join("lineage.json.gz"), b"not gzip").unwrap();
    let err = Lineage::load(&path).unwrap_err().to_string();
    assert!(err.contains("lineage.json.gz: cannot read"), "{err}");
    l.save(&path).unwrap();
    assert_eq!(Lineage::load(&path).unwrap().to_json(), l.to_json());
    let none = Lineage::load(&dir.path().join("missing.json")).unwrap_err();
    assert!(
        none.to_string().contains("missing.json: cannot read"),
        "{none}"
    );
}

#[test]
fn malformed_lineage_names_file_and_line() {
    let err = Lineage::from_json(
        "{\n  \"format\": 1,\n  \"nodes\": 3\n}",
        Path::new("x/lineage.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("x/lineage.json:3:"), "{err}");
    let newer = Lineage::from_json(
        r#"{"format": 99, "nodes": [], "edges": []}"#,
        Path::new("l.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(newer.contains("format 99 is newer"), "{newer}");
}

#[test]
fn duplicates_and_unknown_parents_are_refused() {
    let mut l = hand_built("dev", "obj");
    let root = Genome::baseline();
    assert!(matches!(
        l.add(node(root, 3, vec![], None), &[]),
        Err(LineageError::Duplicate(_))
    ));
    let orphan = root.with_allele(Gene::Exp, 1);
    let err = l
        .add(
            node(orphan, 3, vec![], None),
            &[orphan
                .with_allele(Gene::Exp, 0)
                .with_allele(Gene::SplitKv, 3)
                .id()],
        )
        .unwrap_err();
    assert!(matches!(err, LineageError::UnknownParent { .. }));
}

#[test]
fn champion_path_follows_primary_parents() {
    let l = hand_built("dev", "obj");
    let path: Vec<f64> = l
        .champion_path()
        .iter()
        .map(|n| n.score_us().unwrap())
        .collect();
    assert_eq!(path, vec![100.0, 80.0, 50.0]);
    assert_eq!(
        l.best_so_far(),
        vec![(1, 100.0), (2, 80.0), (3, 80.0), (4, 50.0), (5, 50.0)]
    );
}

#[test]
fn markdown_evolution_path_snapshot() {
    insta::assert_snapshot!(render_markdown(&hand_built(
        "NVIDIA H100 80GB HBM3",
        "B1 H8 L512 D64 f16"
    )));
}

#[test]
fn seed_lineage_records_the_hand_evolution() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes");
    let named: Vec<GenomeFile> = SEED_PATH
        .iter()
        .map(|n| GenomeFile::load(&root.join(format!("{n}.toml"))).unwrap())
        .collect();
    let l = seed_lineage(&named, seeds_record).unwrap();
    let names: Vec<_> = l.nodes().map(Node::label).collect();
    assert_eq!(names, SEED_PATH);
    // v5 differs from v3 in Q·Kᵀ math only.
    let v5 = l.nodes().nth(1).unwrap();
    assert_eq!(
        v5.operators,
        vec![Operator::Mutate {
            gene: Gene::QkMath,
            from: "scalar".into(),
            to: "wmma".into()
        }]
    );
    assert!(
        l.nodes().last().unwrap().evaluation.is_none(),
        "fa2 was never measured by the seeds"
    );
    insta::assert_snapshot!(render_markdown(&l));
    let missing = seed_lineage(&named[..3], seeds_record)
        .unwrap_err()
        .to_string();
    assert!(missing.contains("genomes/v7a.toml"), "{missing}");
}

#[test]
fn insights_on_a_hand_built_lineage() {
    let h100 = hand_built("H100", "B1 H8 L512 D64 f16");
    let l4 = hand_built("L4", "B4 H16 L1024 D64 f16");
    let ins = insights(&[h100, l4]);
    let find = |rows: &[(GeneChange, ChangeStats)], gene: Gene, to: &str| {
        rows.iter()
            .find(|(c, _)| c.gene == gene && c.to == to)
            .map(|(_, s)| s.clone())
            .unwrap()
    };
    let warps8 = find(&ins.overall, Gene::Warps, "8");
    assert_eq!((warps8.tried, warps8.failed, warps8.helped), (2, 0, 2));
    assert_eq!(warps8.median_speedup, Some(1.25));
    let warps2 = find(&ins.overall, Gene::Warps, "2");
    assert_eq!(
        (
            warps2.tried,
            warps2.failed,
            warps2.helped,
            warps2.median_speedup
        ),
        (2, 2, 0, None)
    );
    let stages = find(&ins.overall, Gene::Stages, "2");
    assert_eq!(stages.median_speedup, Some(1.6));
    assert_eq!(ins.crossover.tried, 2);
    assert_eq!(ins.crossover.median_speedup, Some(80.0 / 90.0));
    assert_eq!(ins.per_device.len(), 2);
    assert_eq!(find(&ins.per_device[0].1, Gene::Warps, "8").tried, 1);
    assert_eq!(ins.per_objective.len(), 2);
    let text = render_insights(&ins);
    assert!(text.contains("| warps 4→8 | 2 | 0 | 2 | 1.25× |"), "{text}");
    assert!(text.contains("### Device: L4"), "{text}");
}

#[test]
fn dot_highlights_the_champion_path() {
    let dot = to_dot(&hand_built("dev", "obj"));
    let red_edges = dot
        .lines()
        .filter(|l| l.contains("->") && l.contains("color=red"))
        .count();
    assert_eq!(red_edges, 2, "{dot}");
    assert!(dot.contains("style=dashed"), "{dot}");
    assert!(dot.contains("green_failed"), "{dot}");
}

#[test]
fn svg_without_graphviz_names_graphviz() {
    if std::process::Command::new("dot").arg("-V").output().is_ok() {
        return; // graphviz is installed here; the message cannot be provoked.
    }
    let dir = tempfile::tempdir().unwrap();
    let err = write_svg(&hand_built("dev", "obj"), &dir.path().join("l.svg")).unwrap_err();
    assert!(err.to_string().contains("graphviz"), "{err}");
}

#[test]
fn best_so_far_plot_is_an_svg() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("best_so_far.svg");
    plot_best_so_far(&hand_built("dev", "obj"), &path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("evaluations"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    let empty = Lineage::new(LineageMeta::default());
    assert!(matches!(
        plot_best_so_far(&empty, &path),
        Err(PlotError::Empty)
    ));
}

/// Island 0: root (100 µs) → a (80 µs). Island 1: x (90 µs), then a taken in from
/// island 0 as an immigrant, and y bred from it (60 µs); island 1 also measured
/// island 0's root on its own.
fn two_islands() -> Vec<(u32, Lineage)> {
    let meta = LineageMeta {
        title: "island".into(),
        device: "dev".into(),
        objective: "obj".into(),
        strategy: "evolutionary".into(),
        seed: Some(1),
    };
    let tagged = |mut n: Node, k: u32| {
        n.island = Some(k);
        n
    };
    let root = Genome::baseline();
    let (a, op_a) = mutate(&root, Gene::Warps, 3);
    let mut zero = Lineage::new(meta.clone());
    zero.add(
        tagged(
            node(
                root,
                0,
                vec![Operator::Random],
                Some(ok(root, 100.0, "dev")),
            ),
            0,
        ),
        &[],
    )
    .unwrap();
    zero.add(
        tagged(node(a, 1, vec![op_a], Some(ok(a, 80.0, "dev"))), 0),
        &[root.id()],
    )
    .unwrap();
    let x = root.with_allele(Gene::Stages, 1);
    let (y, op_y) = mutate(&a, Gene::VecBytes, 2);
    let mut one = Lineage::new(meta);
    one.add(
        tagged(
            node(x, 0, vec![Operator::Random], Some(ok(x, 90.0, "dev"))),
            1,
        ),
        &[],
    )
    .unwrap();
    one.add(
        tagged(
            node(
                root,
                0,
                vec![Operator::Random],
                Some(ok(root, 101.0, "dev")),
            ),
            1,
        ),
        &[],
    )
    .unwrap();
    let immigrant = Operator::Immigrant {
        island: 0,
        generation: 1,
    };
    one.add(
        tagged(node(a, 2, vec![immigrant], Some(ok(a, 80.0, "dev"))), 0),
        &[],
    )
    .unwrap();
    one.add(
        tagged(node(y, 2, vec![op_y], Some(ok(y, 60.0, "dev"))), 1),
        &[a.id()],
    )
    .unwrap();
    vec![(1, one), (0, zero)]
}

#[test]
fn merged_islands_form_one_graph_with_migration_edges() {
    let islands = two_islands();
    let (merged, summary) = merge_islands("merged", &islands).unwrap();
    assert_eq!(
        summary,
        MergeSummary {
            nodes: 4,
            migration_edges: 1,
            immigrants: 1,
            duplicates: 1,
        }
    );
    let tags: Vec<(String, Option<u32>)> = merged
        .nodes()
        .map(|n| (n.score_us().unwrap().to_string(), n.island))
        .collect();
    // Round-robin from island 0; y waits for a, island 0's own node; the root that
    // island 1 measured again is kept once, as island 0 measured it.
    assert_eq!(
        tags,
        [("100", 0), ("80", 0), ("90", 1), ("60", 1)]
            .map(|(s, k)| (s.to_string(), Some(k)))
            .to_vec()
    );
    let champion = merged.champion().unwrap();
    assert_eq!(champion.island, Some(1));
    let path: Vec<Option<u32>> = merged.champion_path().iter().map(|n| n.island).collect();
    assert_eq!(path, [Some(0), Some(0), Some(1)]);
    assert!(render_markdown(&merged).contains("parent measured on island 0"));
    // The same inputs in another order give the same file.
    let mut reversed = islands.clone();
    reversed.reverse();
    assert_eq!(
        merge_islands("merged", &reversed).unwrap().0.to_json(),
        merged.to_json()
    );
}

#[test]
fn merging_without_the_island_an_immigrant_came_from_names_the_fix() {
    let islands = two_islands();
    let only_one: Vec<_> = islands.into_iter().filter(|(k, _)| *k == 1).collect();
    let err = merge_islands("m", &only_one).unwrap_err();
    assert!(
        err.to_string()
            .contains("which no given island measured; pass every island's experiment"),
        "{err}"
    );
    let mut other_device = two_islands();
    other_device[0].1.meta.device = "other".into();
    assert!(matches!(
        merge_islands("m", &other_device),
        Err(MergeError::Device { .. })
    ));
}
