//! A search is of one pass: the forward space never holds a backward kernel, the
//! backward space no forward one, and the operators never cross between them.

use super::operator_properties;
use crate::*;
use evo_genome::{Family, Gene, Genome, GenomeFile, HeadDim, Pass, Target};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::Path;

fn genome(name: &str) -> Genome {
    GenomeFile::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../genomes")
            .join(name),
    )
    .unwrap()
    .genes
}

#[test]
fn the_forward_space_never_proposes_a_backward_kernel() {
    let fa2_bwd = genome("fa2-bwd.toml");
    for t in Target::ALL {
        let space = SearchSpace::full(HeadDim::D64, t);
        assert_eq!(space.pass(), Pass::Forward);
        assert!(!space.contains(&fa2_bwd));
        assert_eq!(space.allowed(Gene::DqMode).len(), 1);
        let mut rng = ChaCha8Rng::seed_from_u64(41);
        for _ in 0..100 {
            let a = space.sample_valid(&mut rng).unwrap();
            let b = space.sample_valid(&mut rng).unwrap();
            let (m, _) = mutate(&a, &space, &mut rng).unwrap();
            let (c, _) = crossover(&a, &b, &space, &mut rng).unwrap();
            // A backward genome repaired into the forward space becomes a forward one.
            let (r, _) = repair(&fa2_bwd, &space, &mut rng).unwrap();
            for g in [a, b, m, c, r] {
                assert_eq!(g.pass(), Pass::Forward, "{}", g.summary());
            }
        }
    }
}

#[test]
fn the_backward_space_holds_backward_kernels_only() {
    for (i, (d, t)) in [(HeadDim::D64, Target::Sm89), (HeadDim::D128, Target::Sm90)]
        .into_iter()
        .enumerate()
    {
        let space = SearchSpace::full_for_pass(Pass::Backward, d, t);
        assert_eq!(space.pass(), Pass::Backward);
        // Both backward families on sm_90; the Hopper one runs nowhere else.
        let index = |f: Family| Family::ALL.iter().position(|&x| x == f).unwrap();
        let families: Vec<usize> = match t {
            Target::Sm90 => vec![index(Family::AmpereBwd), index(Family::HopperBwd)],
            Target::Sm89 => vec![index(Family::AmpereBwd)],
        };
        assert_eq!(space.allowed(Gene::Family), families);
        assert!(space.admits(&genome("fa2-bwd.toml")));
        assert_eq!(space.admits(&genome("fa3-bwd.toml")), t == Target::Sm90);
        assert!(!space.contains(&genome("fa2.toml")));
        // Mutation, crossover and repair (of forward genomes too) stay valid and inside.
        operator_properties(&space, 100, 50 + i as u64);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (r, _) = repair(&genome("fa2.toml"), &space, &mut rng).unwrap();
        assert_eq!(r.pass(), Pass::Backward, "{}", r.summary());
        // dq_mode is a gene of the search (tma_reduce only where hopper_bwd runs).
        let modes: std::collections::HashSet<_> = (0..300)
            .map(|_| space.sample_valid(&mut rng).unwrap().dq_mode)
            .collect();
        assert_eq!(modes.len(), if t == Target::Sm90 { 3 } else { 2 });
    }
}

#[test]
fn a_sub_space_of_two_passes_is_refused() {
    let sub = SubSpace {
        base: genome("fa2.toml"),
        genes: BTreeMap::from([(
            "family".to_string(),
            vec![
                AlleleLabel("ampere".into()),
                AlleleLabel("ampere_bwd".into()),
            ],
        )]),
    };
    let err = SearchSpace::sub(&sub, HeadDim::D64, Target::Sm90).unwrap_err();
    assert_eq!(
        err,
        SpaceError::MixedPasses {
            base: Family::Ampere,
            family: Family::AmpereBwd
        }
    );
    assert!(err.to_string().contains("a search is of one pass"), "{err}");
    // A backward sub-space around fa2-bwd is a backward space.
    let sub = SubSpace {
        base: genome("fa2-bwd.toml"),
        genes: BTreeMap::from([(
            "dq_mode".to_string(),
            vec![AlleleLabel("atomic".into()), AlleleLabel("separate".into())],
        )]),
    };
    let space = SearchSpace::sub(&sub, HeadDim::D64, Target::Sm90).unwrap();
    assert_eq!(space.pass(), Pass::Backward);
    // 64 rows over 8 warps split no separate dq kernel: fa2-bwd alone is valid.
    assert_eq!(space.valid_points().unwrap(), [genome("fa2-bwd.toml")]);
}
