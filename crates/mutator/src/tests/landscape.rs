//! Recorded landscapes on the CPU: only what was recorded replays, gzipped or plain,
//! a two-family sub-space counts each family's genes, mixed devices are refused.

use super::*;

#[test]
fn landscape_replays_only_what_was_recorded() {
    let landscape = Landscape::load(&fixture_dir()).unwrap();
    assert!(landscape.warnings.is_empty(), "{:?}", landscape.warnings);
    assert_eq!(
        landscape.banner(),
        format!(
            "replaying {} measurements recorded on {} on 2026-11-22 (no CUDA device here)",
            landscape.len(),
            fixture::DEVICE
        )
    );
    let mut evaluator = LandscapeEvaluator::new(landscape.clone());
    let inside = landscape.space().valid_points().unwrap()[0];
    assert_eq!(
        evaluator.evaluate(&[inside]).unwrap()[0].genome_id,
        inside.id()
    );
    let outside = inside.with_allele(Gene::SplitKv, 3);
    let err = evaluator
        .evaluate(&[inside, outside])
        .unwrap_err()
        .to_string();
    assert!(err.contains("was not measured in the landscape"), "{err}");
    assert!(err.contains(&outside.id().to_string()), "{err}");
}

#[test]
fn a_gzipped_landscape_loads_like_the_plain_one() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture_dir().join("landscape.toml"),
        dir.path().join("landscape.toml"),
    )
    .unwrap();
    let text = std::fs::read(fixture_dir().join("evaluations.jsonl")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.path().join("evaluations.jsonl.gz")).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(&text).unwrap();
    gz.finish().unwrap();
    let plain = Landscape::load(&fixture_dir()).unwrap();
    let zipped = Landscape::load(dir.path()).unwrap();
    assert_eq!(zipped.len(), plain.len());
    assert_eq!(
        zipped.optimum().map(|(e, us)| (e.genome_id.clone(), us)),
        plain.optimum().map(|(e, us)| (e.genome_id.clone(), us))
    );
    for g in plain.space().valid_points().unwrap() {
        assert_eq!(zipped.get(&g.id()), plain.get(&g.id()));
    }
    // Neither file: the error names the plain file and says how to record one.
    std::fs::remove_file(dir.path().join("evaluations.jsonl.gz")).unwrap();
    let err = Landscape::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("evaluations.jsonl") && err.contains("evo landscape"),
        "{err}"
    );
}

/// A sub-space over both families: each family counts only the genes that shape its
/// kernels, a point of one family keeps the other family's genes at baseline, and a
/// genome is inside when the genes of its own family are.
#[test]
fn a_two_family_sub_space_multiplies_only_the_genes_of_each_family() {
    let text = format!(
        "[base]\n{}\n[genes]\nfamily = [\"ampere\", \"hopper\"]\nqk_math = [\"wmma\", \"mma\"]\n\
         pv_math = [\"wmma\", \"mma\"]\nblock_n = [64, 128]\nconsumer_wgs = [1, 2, 3]\n\
         pingpong = [\"off\", \"on\"]\n",
        toml::to_string(&named_genomes()[6].genes).unwrap()
    );
    let sub: SubSpace = toml::from_str(&text).unwrap();
    let space = SearchSpace::sub(&sub, HeadDim::D64, Target::Sm90).unwrap();
    // Ampere: qk x pv x block_n = 8; Hopper: block_n x consumers x ping-pong = 12.
    assert_eq!(space.size(), 8 + 12);
    let points: Vec<Genome> = space.points().collect();
    assert_eq!(points.len(), 20);
    let ids: HashSet<GenomeId> = points.iter().map(|g| g.id()).collect();
    assert_eq!(ids.len(), 20, "every point is a distinct kernel");
    for g in &points {
        assert_eq!(*g, g.canonical(), "{}", g.summary());
        assert!(space.contains(g), "{}", g.summary());
    }
    let valid = space.valid_points().unwrap();
    assert!(valid.iter().all(|g| g.is_valid(HeadDim::D64, Target::Sm90)));
    assert_eq!(
        valid.len(),
        points
            .iter()
            .filter(|g| g.is_valid(HeadDim::D64, Target::Sm90))
            .count()
    );
    assert!(valid.iter().any(|g| g.family == evo_genome::Family::Hopper));
    assert!(valid.iter().any(|g| g.family == evo_genome::Family::Ampere));
    // A Hopper genome whose Ampere genes lie outside the sub-space is still inside it
    // (they make no kernel); one whose Hopper gene does not is not.
    let hopper = *valid
        .iter()
        .find(|g| g.family == evo_genome::Family::Hopper)
        .unwrap();
    let scalar = Gene::QkMath
        .allele_labels()
        .iter()
        .position(|l| l == "scalar")
        .unwrap();
    assert!(space.contains(&hopper.with_allele(Gene::QkMath, scalar)));
    let tma_only = |g: &Genome| g.allele_label(Gene::HopperLoad);
    let other_load = (0..Gene::HopperLoad.allele_count())
        .find(|&i| Gene::HopperLoad.allele_labels()[i] != tma_only(&hopper))
        .unwrap();
    assert!(!space.contains(&hopper.with_allele(Gene::HopperLoad, other_load)));
    // And the operators stay inside it.
    operator_properties(&space, 300, 11);
}

#[test]
fn landscape_of_mixed_devices_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture_dir().join("landscape.toml"),
        dir.path().join("landscape.toml"),
    )
    .unwrap();
    let mut e = cache::some_evaluations(1).pop().unwrap();
    e.device = "NVIDIA H100 80GB HBM3".into();
    std::fs::write(
        dir.path().join("evaluations.jsonl"),
        serde_json::to_string(&e).unwrap() + "\n",
    )
    .unwrap();
    let err = Landscape::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("evaluations.jsonl:1: measured on `NVIDIA H100 80GB HBM3`"),
        "{err}"
    );
}
