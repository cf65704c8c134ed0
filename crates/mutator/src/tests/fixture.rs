//! The SYNTHETIC landscape fixture (tests/fixtures/synthetic-landscape): made-up
//! latencies from a formula, for tests only. It is never a measurement and never a
//! default; the real landscape is recorded on a GPU with `evo landscape`.
//!
//! `check_or_write` regenerates the files from the formula and compares; run the
//! test with `EVO_WRITE_FIXTURE=1` to rewrite them after changing the formula.

use crate::landscape::{LandscapeMeta, EVALUATIONS_FILE, META_FILE};
use crate::space::{AlleleLabel, SearchSpace, SubSpace};
use evo_genome::{Gene, Genome, GenomeFile, HeadDim, Problem, Target};
use evo_record::{Evaluation, Status, Timing};
use std::collections::BTreeMap;
use std::path::Path;

pub const DEVICE: &str = "Synthetic GPU (test fixture, not a measurement)";

/// The scope of the cache tests' records: the seed shape on the fixture's device.
pub fn cache_scope() -> crate::cache::CacheScope {
    crate::cache::CacheScope {
        objective: "B1 H8 L512 D64 f16".into(),
        device: DEVICE.into(),
        template_hash: "t".into(),
        toolchain: "tc".into(),
    }
}

fn sub_space() -> SubSpace {
    let base =
        GenomeFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/v7a.toml"))
            .unwrap()
            .genes;
    let labels = |v: &[&str]| {
        v.iter()
            .map(|s| AlleleLabel(s.to_string()))
            .collect::<Vec<_>>()
    };
    let genes = BTreeMap::from([
        ("block_m".to_string(), labels(&["32", "64", "128"])),
        ("block_n".to_string(), labels(&["32", "64", "128"])),
        ("warps".to_string(), labels(&["2", "4", "8"])),
        ("stages".to_string(), labels(&["1", "2", "3"])),
        ("kv_load".to_string(), labels(&["direct", "cp_async"])),
        ("exp".to_string(), labels(&["exp", "exp2"])),
    ]);
    SubSpace { base, genes }
}

fn meta() -> LandscapeMeta {
    LandscapeMeta {
        device: DEVICE.into(),
        date: "2026-11-22".into(),
        problem: Problem::seed(),
        template_hash: "synthetic".into(),
        toolchain: "none (synthetic)".into(),
        target: Target::Sm90,
        subspace: sub_space(),
        notes: "SYNTHETIC: latencies from a formula in crates/mutator/src/tests/fixture.rs, for tests only; not a measurement".into(),
    }
}

/// The made-up latency: a product of per-gene factors with one interaction (cp.async
/// pays off only with two or more stages), a few failures, and ±2% of
/// deterministic "noise" from the genome id.
pub fn synthetic_evaluation(g: &Genome, head_dim: HeadDim, target: Target) -> Evaluation {
    let violations = g.violations(head_dim, target);
    if !violations.is_empty() {
        let detail = violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        return Evaluation::failed(*g, DEVICE, Status::Invalid, detail);
    }
    let idx = |gene: Gene| g.allele_index(gene);
    if g.warps.get() == 8 && g.block_m.get() == 32 {
        return Evaluation::failed(
            *g,
            DEVICE,
            Status::GreenFailed,
            "synthetic: rows 16..31 wrong",
        );
    }
    if g.block_n.get() == 128 && g.stages.get() == 3 && idx(Gene::KvLoad) == 0 {
        return Evaluation::failed(
            *g,
            DEVICE,
            Status::CompileFailed,
            "synthetic: ptxas out of registers",
        );
    }
    let tile = |v: u32, table: [(u32, f64); 4]| {
        table.iter().find(|(k, _)| *k == v).map_or(1.5, |(_, f)| *f)
    };
    let mut us = 40.0;
    us *= tile(
        g.block_m.get(),
        [(16, 1.6), (32, 1.3), (64, 1.0), (128, 1.15)],
    );
    us *= tile(
        g.block_n.get(),
        [(16, 1.5), (32, 1.2), (64, 1.0), (128, 1.1)],
    );
    us *= tile(g.warps.get(), [(1, 2.0), (2, 1.4), (4, 1.0), (8, 1.1)]);
    let cp_async = idx(Gene::KvLoad) == 1;
    us *= match (cp_async, g.stages.get()) {
        (false, 1) => 1.0,
        (false, _) => 0.97,
        (true, 1) => 1.05,
        (true, 2) => 0.85,
        (true, _) => 0.9,
    };
    if idx(Gene::Exp) == 1 {
        us *= 0.95;
    }
    let noise = u8::from_str_radix(&g.id().0[..2], 16).unwrap() as f64 / 255.0;
    us *= 0.98 + 0.04 * noise;
    let us = (us * 1000.0).round() / 1000.0;
    let problem = Problem::seed();
    Evaluation {
        genome_id: g.id(),
        genome: *g,
        device: DEVICE.into(),
        device_index: None,
        status: Status::Ok,
        score_us: Some(us),
        timings: vec![Timing {
            problem,
            median_us: us,
            min_us: us,
            max_us: us,
            repeats: 1,
            launches_per_repeat: 1,
            method: "synthetic".into(),
            tflops: (problem.flops() / (us * 1e-6) / 1e12 * 1000.0).round() / 1000.0,
        }],
        resources: None,
        detail: String::new(),
        gates: Vec::new(),
    }
}

/// Compares the fixture files with the generator's output (or writes them).
pub fn check_or_write(dir: &Path) {
    let meta = meta();
    let space = SearchSpace::sub(&meta.subspace, meta.problem.head_dim, meta.target).unwrap();
    let toml_text = format!(
        "# SYNTHETIC landscape for tests only: made-up latencies, not a measurement.\n\
         # Regenerate: EVO_WRITE_FIXTURE=1 cargo test -p evo-mutator synthetic_fixture\n{}",
        toml::to_string(&meta).unwrap()
    );
    let mut jsonl = String::new();
    for g in space.points() {
        jsonl.push_str(
            &serde_json::to_string(&synthetic_evaluation(
                &g,
                meta.problem.head_dim,
                meta.target,
            ))
            .unwrap(),
        );
        jsonl.push('\n');
    }
    if std::env::var_os("EVO_WRITE_FIXTURE").is_some() {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(META_FILE), &toml_text).unwrap();
        std::fs::write(dir.join(EVALUATIONS_FILE), &jsonl).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(dir.join(META_FILE)).unwrap(),
        toml_text,
        "run with EVO_WRITE_FIXTURE=1 to regenerate"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(EVALUATIONS_FILE)).unwrap(),
        jsonl,
        "run with EVO_WRITE_FIXTURE=1 to regenerate"
    );
}
