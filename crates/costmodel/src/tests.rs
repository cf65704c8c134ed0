//! The training set's selection (device, pass, left-out shapes, medians of repeats, the
//! files it reads and passes over) and the model learning a ranking it can be checked on.

use crate::{features, spearman, ForestSource, Selection, TrainingSet};
use evo_genome::{Genome, Pass, Problem};
use evo_mutator::CostModelSource;
use evo_record::{Evaluation, Status};
use std::io::Write;

const H100: &str = "NVIDIA H100 80GB HBM3";

fn problem(q_len: u32) -> Problem {
    Problem {
        q_len,
        kv_len: q_len,
        ..Problem::seed()
    }
}

fn ok(genome: Genome, problem: Problem, us: f64, device: &str) -> Evaluation {
    Evaluation::summarized(genome, device, problem, us, "graph")
}

/// Genomes that differ in the stage count and the split: a small family to rank.
fn genomes() -> Vec<Genome> {
    use evo_genome::Gene;
    let base = Genome::baseline();
    let mut out = Vec::new();
    for stages in 0..2 {
        for split in 0..3 {
            let g = base
                .with_allele(Gene::Stages, stages)
                .with_allele(Gene::SplitKv, split);
            if !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out
}

fn write_lines(path: &std::path::Path, lines: &[String]) {
    let mut f = std::fs::File::create(path).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

fn selection(leave_out: Vec<Problem>) -> Selection {
    Selection {
        device: Some(H100.into()),
        pass: Pass::Forward,
        leave_out,
    }
}

#[test]
fn the_training_set_leaves_out_the_judged_shape_other_devices_and_failures() {
    let dir = tempfile::tempdir().unwrap();
    let g = genomes();
    let (a, judged) = (problem(1024), problem(512));
    let mut failed = ok(g[2], a, 1.0, H100);
    failed.status = Status::GreenFailed;
    write_lines(
        &dir.path().join("evaluations.jsonl"),
        &[
            serde_json::to_string(&ok(g[0], a, 10.0, H100)).unwrap(),
            // Measured twice: the median of the two counts once.
            serde_json::to_string(&ok(g[1], a, 20.0, H100)).unwrap(),
            serde_json::to_string(&ok(g[1], a, 40.0, H100)).unwrap(),
            serde_json::to_string(&failed).unwrap(),
            serde_json::to_string(&ok(g[3], a, 5.0, "NVIDIA H200")).unwrap(),
            serde_json::to_string(&ok(g[0], judged, 3.0, H100)).unwrap(),
            // A bench row is not an evaluation: passed over.
            r#"{"kernel":"sdpa","us":12.0}"#.into(),
        ],
    );
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    write_lines(
        &dir.path().join("nested/notes.txt"),
        &[serde_json::to_string(&ok(g[4], a, 1.0, H100)).unwrap()],
    );
    let set = TrainingSet::load(dir.path(), &selection(vec![judged])).unwrap();
    assert_eq!(set.files, 1, "only *.jsonl and *.jsonl.gz are records");
    assert_eq!(set.left_out, 1);
    assert_eq!(set.shapes, 1);
    let mut rows: Vec<(String, f64)> = set
        .rows
        .iter()
        .map(|r| (r.genome.id().to_string(), r.log_ratio))
        .collect();
    rows.sort_by(|x, y| x.1.total_cmp(&y.1));
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0], (g[0].id().to_string(), 0.0));
    // The median of 20 and 40 (the upper of two) over the shape's best, 10.
    assert!((rows[1].1 - 4f64.ln()).abs() < 1e-12, "{rows:?}");

    // Every device's records when none is named.
    let any = Selection {
        device: None,
        ..selection(vec![judged])
    };
    assert_eq!(TrainingSet::load(dir.path(), &any).unwrap().rows.len(), 3);
}

#[test]
fn a_folder_without_usable_records_is_an_error_that_says_what_to_record() {
    let dir = tempfile::tempdir().unwrap();
    write_lines(
        &dir.path().join("evaluations.jsonl"),
        &[serde_json::to_string(&ok(genomes()[0], problem(512), 3.0, H100)).unwrap()],
    );
    let err = TrainingSet::load(dir.path(), &selection(vec![problem(512)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no evaluation recorded on `NVIDIA H100 80GB HBM3`"),
        "{err}"
    );
    assert!(err.contains("--model-data"), "{err}");
    let missing = TrainingSet::load(&dir.path().join("absent"), &selection(vec![]))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("absent"), "{missing}");
}

#[test]
fn gzipped_records_are_read_once_beside_or_without_their_plain_twin() {
    let dir = tempfile::tempdir().unwrap();
    let g = genomes();
    let line = serde_json::to_string(&ok(g[0], problem(1024), 10.0, H100)).unwrap() + "\n";
    let gz = |path: &std::path::Path| {
        let mut e = flate2::write::GzEncoder::new(
            std::fs::File::create(path).unwrap(),
            flate2::Compression::default(),
        );
        e.write_all(line.as_bytes()).unwrap();
        e.finish().unwrap();
    };
    gz(&dir.path().join("a.jsonl.gz"));
    // A plain file and its gzipped twin hold one record, read once.
    std::fs::write(dir.path().join("b.jsonl"), &line).unwrap();
    gz(&dir.path().join("b.jsonl.gz"));
    let set = TrainingSet::load(dir.path(), &selection(vec![])).unwrap();
    assert_eq!(set.rows.len(), 1, "one genome on one shape");
    assert_eq!(set.files, 2, "b.jsonl.gz is b.jsonl's twin: not read");
    // Named on its own, a gzipped file is read as it is.
    let one = TrainingSet::load(&dir.path().join("b.jsonl.gz"), &selection(vec![])).unwrap();
    assert_eq!((one.rows.len(), one.files), (1, 1));
}

#[test]
fn the_forest_learns_a_ranking_and_corrects_itself_on_the_searched_shape() {
    // On the recorded shapes the time grows with the split; on the searched shape it is
    // the other way round. The records' forest ranks by the split; after the search's own
    // measurements the correction turns the ranking over.
    let g = genomes();
    let split = |x: &Genome| x.allele_index(evo_genome::Gene::SplitKv) as f64;
    let mut rows = Vec::new();
    for q in [1024, 2048, 4096] {
        for x in &g {
            rows.push(crate::Row {
                problem: problem(q),
                genome: *x,
                device: H100.into(),
                us: split(x).exp(),
                log_ratio: split(x),
            });
        }
    }
    let set = TrainingSet {
        rows,
        shapes: 3,
        files: 1,
        left_out: 0,
    };
    let searched = problem(512);
    let source = ForestSource::train(&set, searched).unwrap();
    let mut model = source.start();
    let before = model.predict(&g);
    let pairs: Vec<(f64, f64)> = g.iter().zip(&before).map(|(x, p)| (*p, split(x))).collect();
    assert!(spearman(&pairs).unwrap() > 0.8, "{pairs:?}");
    // This shape's measurements, twice over so the correction has enough rows.
    let measured: Vec<Evaluation> = g
        .iter()
        .chain(&g)
        .map(|x| ok(*x, searched, (3.0 - split(x)).exp(), H100))
        .collect();
    model.observe(&measured);
    let after = model.predict(&g);
    let pairs: Vec<(f64, f64)> = g.iter().zip(&after).map(|(x, p)| (*p, -split(x))).collect();
    assert!(spearman(&pairs).unwrap() > 0.8, "{pairs:?}");
    assert!(model.quality().contains("Spearman"), "{}", model.quality());
    assert!(source
        .describe()
        .contains("18 recorded genomes of 3 other shapes"));
}

#[test]
fn spearman_ranks_ties_together_and_needs_three_pairs() {
    assert_eq!(spearman(&[(1.0, 2.0), (2.0, 3.0)]), None);
    let up = [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)];
    assert!((spearman(&up).unwrap() - 1.0).abs() < 1e-12);
    let down = [(1.0, 30.0), (2.0, 20.0), (3.0, 10.0)];
    assert!((spearman(&down).unwrap() + 1.0).abs() < 1e-12);
    // A constant prediction orders nothing.
    assert_eq!(spearman(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
}

#[test]
fn features_have_one_length_for_every_family() {
    use evo_genome::{Family, Gene};
    let p = Problem::seed();
    let lens: Vec<usize> = Family::ALL
        .iter()
        .enumerate()
        .map(|(i, _)| features(&Genome::baseline().with_allele(Gene::Family, i), &p).len())
        .collect();
    assert!(lens.windows(2).all(|w| w[0] == w[1]), "{lens:?}");
}
