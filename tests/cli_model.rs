//! The cost model through the binary, on the CPU: `evo model`'s held-out table and its
//! snapshots, the guided strategy of `evo evolve` (replaying the recorded H100 landscape)
//! and of `evo strategies`. The expected counts are read from the snapshot file itself,
//! not from the code under test, so a selection that drops, doubles or mislabels rows
//! shows up as a number that disagrees.

use crate::util::{evo, stderr, stdout};
use evo_genome::{Gene, Genome, Problem};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Output;

/// The training snapshot the cost model's experiment records (every H100 forward record
/// when it was made): a fixed input, whatever is recorded later.
const SNAPSHOT: &str = "experiments/2026-11-26-cost-model/h100.snapshot.jsonl.gz";
/// The recorded landscape of the seed shape, replayed without a GPU.
const LANDSCAPE: &str = "replay:experiments/2026-11-23-h100-landscape";
/// The seed shape, which the landscape holds: the guided search's left-out shape.
const SEED_SHAPE: &str = "B1 H8 L512 D64 f16";
const H100: &str = "NVIDIA H100 80GB HBM3";

/// Exit 2 with `needle` in stderr, and no panic.
fn refused(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected `{needle}` in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn succeeded(out: &Output) -> String {
    assert!(out.status.success(), "{}\n{}", stdout(out), stderr(out));
    stdout(out)
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

/// The lines of a gzipped JSON-lines file.
fn gz_lines(path: &Path) -> Vec<String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines().map(str::to_string).collect()
}

/// Rows per shape label in a snapshot: one line is one genome on one shape.
fn rows_per_shape(path: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in gz_lines(path) {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        let problem: Problem =
            serde_json::from_value(value["timings"][0]["problem"].clone()).unwrap();
        *out.entry(problem.label()).or_insert(0) += 1;
    }
    out
}

fn snapshot_rows() -> BTreeMap<String, usize> {
    rows_per_shape(&crate::util::repo_root().join(SNAPSHOT))
}

/// The `(N records of the left-out shapes passed over)` of a `cost model:` line.
fn passed_over(stdout: &str) -> usize {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("cost model: "))
        .unwrap_or_else(|| panic!("no `cost model:` line in:\n{stdout}"));
    let (_, tail) = line.rsplit_once(" (").unwrap_or_else(|| panic!("{line}"));
    let (n, _) = tail
        .split_once(" records of the left-out shapes passed over")
        .unwrap_or_else(|| panic!("{line}"));
    n.parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn the_held_out_table_lists_every_shape_with_enough_genomes_and_a_rank_correlation() {
    let rows = snapshot_rows();
    let total: usize = rows.values().sum();
    let out = succeeded(&evo(
        &["model", "--model-data", SNAPSHOT, "--min-rows", "3000"],
        &[],
    ));
    assert!(
        out.starts_with(&format!(
            "{total} recorded genomes on {} shapes, from 1 record file under {SNAPSHOT}\n",
            rows.len()
        )),
        "{out}"
    );
    // The table, in label order, is exactly the shapes with 3000 genomes or more.
    let expected: Vec<(String, usize)> = rows
        .iter()
        .filter(|(_, n)| **n >= 3000)
        .map(|(s, n)| (s.clone(), *n))
        .collect();
    assert!(
        expected.iter().any(|(s, _)| s == SEED_SHAPE),
        "{expected:?}"
    );
    assert!(
        expected.len() < rows.len(),
        "--min-rows leaves some shape out: {rows:?}"
    );
    let table: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("| B"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let listed: Vec<(String, usize)> = table
        .iter()
        .map(|cells| (cells[0].to_string(), cells[1].parse().unwrap()))
        .collect();
    assert_eq!(listed, expected, "{out}");
    for cells in &table {
        let number = |i: usize| -> f64 {
            cells[i]
                .parse()
                .unwrap_or_else(|_| panic!("cell {i} of {cells:?} is not a number"))
        };
        let rho = number(2);
        assert!((-1.0..=1.0).contains(&rho), "{cells:?}");
        // Times over the shape's best: never below 1, and the best of ten first picks
        // is at least as fast as the first alone.
        let (first, ten) = (number(3), number(4));
        assert!(first >= 1.0 && ten >= 1.0 && ten <= first, "{cells:?}");
    }
}

#[test]
fn a_snapshot_file_is_refused_before_anything_is_read_or_written() {
    let tmp = tempfile::tempdir().unwrap();
    let model = |snapshot: &Path| {
        evo(
            &[
                "model",
                "--model-data",
                SNAPSHOT,
                "--snapshot",
                &path_arg(snapshot),
            ],
            &[],
        )
    };
    let plain = tmp.path().join("rows.jsonl.gz");
    refused(
        &model(&plain),
        "rows.jsonl.gz: name a `*.snapshot.jsonl.gz` file",
    );
    assert!(!plain.exists());

    let existing = tmp.path().join("kept.snapshot.jsonl.gz");
    std::fs::write(&existing, "kept").unwrap();
    refused(
        &model(&existing),
        "kept.snapshot.jsonl.gz exists (4 bytes); pass --force to replace it",
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "kept");

    let nowhere = tmp.path().join("absent/rows.snapshot.jsonl.gz");
    refused(&model(&nowhere), "absent does not exist; create it first");
    assert!(!tmp.path().join("absent").exists());
}

/// One evaluation line as `evo evolve` records it (a bare evaluation).
fn evaluation(genome: Genome, problem: Problem, us: f64) -> String {
    serde_json::json!({
        "genome_id": genome.id().to_string(),
        "genome": genome,
        "device": H100,
        "status": "ok",
        "score_us": us,
        "timings": [{
            "problem": problem,
            "median_us": us,
            "min_us": us,
            "max_us": us,
            "repeats": 10,
            "launches_per_repeat": 1,
            "method": "graph",
            "tflops": 1.0,
        }],
        "resources": null,
        "detail": "",
    })
    .to_string()
}

#[test]
fn a_snapshot_of_a_folder_reads_back_the_same_rows_and_a_folder_walk_passes_it_over() {
    let tmp = tempfile::tempdir().unwrap();
    let records = tmp.path().join("records");
    std::fs::create_dir(&records).unwrap();
    let base = Genome::baseline();
    let g: Vec<Genome> = (0..3)
        .map(|split| base.with_allele(Gene::SplitKv, split))
        .collect();
    let seed = Problem::seed();
    let longer = Problem {
        q_len: 1024,
        kv_len: 1024,
        ..seed
    };
    assert_eq!(seed.label(), SEED_SHAPE);
    // Three genomes on one shape (the first measured three times: its median counts
    // once), two on the other.
    let lines = [
        evaluation(g[0], longer, 10.0),
        evaluation(g[0], longer, 30.0),
        evaluation(g[0], longer, 20.0),
        evaluation(g[1], longer, 40.0),
        evaluation(g[2], longer, 50.0),
        evaluation(g[0], seed, 5.0),
        evaluation(g[1], seed, 6.0),
    ];
    let mut file = std::fs::File::create(records.join("evaluations.jsonl")).unwrap();
    for l in &lines {
        writeln!(file, "{l}").unwrap();
    }
    drop(file);
    let counts = format!(
        "5 recorded genomes on 2 shapes, from 1 record file under {}\n",
        records.display()
    );

    let snapshot = tmp.path().join("five.snapshot.jsonl.gz");
    let out = succeeded(&evo(
        &[
            "model",
            "--model-data",
            &path_arg(&records),
            "--snapshot",
            &path_arg(&snapshot),
        ],
        &[],
    ));
    assert!(out.starts_with(&counts), "{out}");
    assert!(
        out.contains(&format!("wrote {}", snapshot.display())),
        "{out}"
    );
    assert!(
        out.contains("no shape has 200 recorded genomes to hold out"),
        "{out}"
    );
    assert_eq!(
        rows_per_shape(&snapshot),
        BTreeMap::from([(longer.label(), 3), (seed.label(), 2)])
    );
    // The repeated genome's row is at its median.
    let medians: Vec<f64> = gz_lines(&snapshot)
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| {
            v["genome_id"] == g[0].id().to_string() && v["timings"][0]["problem"]["q_len"] == 1024
        })
        .map(|v| v["score_us"].as_f64().unwrap())
        .collect();
    assert_eq!(medians, [20.0]);

    let read_back = succeeded(&evo(&["model", "--model-data", &path_arg(&snapshot)], &[]));
    assert!(
        read_back.starts_with(&format!(
            "5 recorded genomes on 2 shapes, from 1 record file under {}\n",
            snapshot.display()
        )),
        "{read_back}"
    );

    // Beside the records it repeats, the snapshot is not read by the folder's walk.
    std::fs::copy(&snapshot, records.join("five.snapshot.jsonl.gz")).unwrap();
    let walked = succeeded(&evo(&["model", "--model-data", &path_arg(&records)], &[]));
    assert!(walked.starts_with(&counts), "{walked}");
    // The guided model's left-out count is of record lines, so a snapshot read beside
    // its records would raise it from 2 to 4.
    let guided = succeeded(&evo(
        &[
            "strategies",
            "--guided",
            "--seeds",
            "1",
            "--checkpoints",
            "16",
            "--model-data",
            &path_arg(&records),
        ],
        &[],
    ));
    assert_eq!(passed_over(&guided), 2, "{guided}");
    assert!(
        guided.contains("on 3 recorded genomes of 1 other shape from 1 file"),
        "{guided}"
    );
}

#[test]
fn a_guided_search_records_its_model_data_and_reports_the_model() {
    let rows = snapshot_rows();
    let total: usize = rows.values().sum();
    let left_out = rows[SEED_SHAPE];
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("e");
    let exp_arg = path_arg(&exp);
    let guided = |extra: &[&str]| {
        let mut args = vec!["evolve", "--experiment", &exp_arg, "--quiet"];
        args.extend_from_slice(extra);
        evo(&args, &[])
    };
    let out = succeeded(&guided(&[
        "--backend",
        LANDSCAPE,
        "--strategy",
        "guided",
        "--budget",
        "32",
        "--model-data",
        SNAPSHOT,
    ]));
    let description = format!(
        "random forest (80 trees) on {} recorded genomes of {} other shapes from 1 file ({left_out} records of the left-out shapes passed over), corrected online",
        total - left_out,
        rows.len() - 1
    );
    assert!(
        out.contains(&format!("\ncost model: {description}\n")),
        "{out}"
    );
    assert!(
        out.contains("32 evaluations: 32 fresh, 0 from the cache"),
        "{out}"
    );
    assert!(
        out.contains("\n  cost model: predicted the order of the "),
        "{out}"
    );
    let record = std::fs::read_to_string(exp.join("experiment.toml")).unwrap();
    let toml: toml::Value = toml::from_str(&record).unwrap();
    assert_eq!(toml["strategy"].as_str(), Some("guided"), "{record}");
    assert_eq!(toml["model_data"].as_str(), Some(SNAPSHOT), "{record}");
    let report = std::fs::read_to_string(exp.join("report.md")).unwrap();
    let (_, section) = report
        .split_once("\n## Cost model\n\n")
        .unwrap_or_else(|| panic!("no cost model section in:\n{report}"));
    assert!(
        section.starts_with(&format!("- {description}\n")),
        "{section}"
    );
    assert!(
        section.contains("- This search: predicted the order of the ")
            && section.contains("with Spearman ρ = "),
        "{section}"
    );

    // A resume learns from the records it was started with, or it is another search.
    let lineage = std::fs::read_to_string(exp.join("lineage.json")).unwrap();
    refused(
        &guided(&["--model-data", "experiments"]),
        &format!(
            "records model_data = {SNAPSHOT}, but experiments was given; drop the option to resume"
        ),
    );
    assert_eq!(
        std::fs::read_to_string(exp.join("experiment.toml")).unwrap(),
        record
    );
    assert_eq!(
        std::fs::read_to_string(exp.join("lineage.json")).unwrap(),
        lineage
    );
    // The same records: the search proposes its 32 candidates again, all on record.
    let more = succeeded(&guided(&["--budget", "48", "--model-data", SNAPSHOT]));
    assert!(
        more.contains("48 evaluations: 16 fresh, 32 from the cache"),
        "{more}"
    );
}

#[test]
fn model_data_and_a_suite_are_refused_where_the_guided_strategy_cannot_use_them() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("e");
    let exp_arg = path_arg(&exp);
    let evolve = |extra: &[&str]| {
        let mut args = vec![
            "evolve",
            "--backend",
            LANDSCAPE,
            "--experiment",
            &exp_arg,
            "--quiet",
        ];
        args.extend_from_slice(extra);
        evo(&args, &[])
    };
    refused(
        &evolve(&["--model-data", SNAPSHOT]),
        "--model-data is the guided strategy's; add --strategy guided",
    );
    refused(
        &evolve(&["--strategy", "random", "--model-data", SNAPSHOT]),
        "--model-data is the guided strategy's; add --strategy guided",
    );
    refused(
        &evolve(&["--strategy", "guided", "--suite", "anchors"]),
        "--suite: the guided strategy's model ranks genomes for one shape",
    );
    assert!(!exp.exists(), "a refused start left a folder");
    // The steady-state search takes the model too: each answer's newcomer is its pick.
    let steady = succeeded(&evolve(&[
        "--strategy",
        "guided",
        "--steady",
        "--budget",
        "32",
        "--model-data",
        SNAPSHOT,
    ]));
    assert!(steady.contains("32 evaluations: 32 fresh"), "{steady}");
    assert!(
        steady.contains("  cost model: predicted the order of"),
        "{steady}"
    );
    let report = std::fs::read_to_string(exp.join("report.md")).unwrap();
    assert!(report.contains("## Cost model"), "{report}");
}

#[test]
fn strategies_add_a_guided_row_whose_model_never_saw_the_landscape_shape() {
    let rows = snapshot_rows();
    let strategies = |extra: &[&str]| {
        let mut args = vec![
            "strategies",
            "--guided",
            "--seeds",
            "2",
            "--checkpoints",
            "16",
            "--model-data",
            SNAPSHOT,
        ];
        args.extend_from_slice(extra);
        succeeded(&evo(&args, &[]))
    };
    let out = strategies(&[]);
    let guided: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("| guided |"))
        .collect();
    // One row in each table: the median fraction of the optimum, the seeds at it.
    assert_eq!(guided.len(), 2, "{out}");
    let fraction: f64 = guided[0]
        .trim_matches('|')
        .split(" | ")
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((0.0..=1.0).contains(&fraction), "{out}");
    let passed = passed_over(&out);
    assert!(passed > 0, "{out}");
    assert_eq!(passed, rows[SEED_SHAPE], "{out}");

    // A shape given with --leave-out is passed over too.
    let causal = format!("{SEED_SHAPE} causal");
    let stricter = strategies(&["--leave-out", "1,8,512,512,64,f16,causal"]);
    assert_eq!(
        passed_over(&stricter),
        rows[SEED_SHAPE] + rows[&causal],
        "{stricter}"
    );
}
