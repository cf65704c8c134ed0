//! Unit tests of the Hopper family's genes, rules, shared memory and ids.

use super::*;

fn fa3() -> Genome {
    Genome {
        family: Family::Hopper,
        consumer_wgs: ConsumerWgs::C2,
        block_n: BlockN::N128,
        stages: Stages::S2,
        hopper_load: HopperLoad::Tma,
        exp: ExpFn::Exp2,
        producer_regs: ProducerRegs::R24,
        pingpong: Switch::On,
        softmax_overlap: Overlap::On,
        ..Genome::baseline()
    }
}

#[test]
fn hopper_register_file_rule_is_the_consumers_share() {
    // Three consumer warpgroups without setmaxnreg: 512 threads, 128 registers each; O 64 +
    // S 64 + P 32 at D128, block_n 128 cannot fit (ptxas fails to compile it).
    let g = Genome {
        consumer_wgs: ConsumerWgs::C3,
        producer_regs: ProducerRegs::None,
        ..fa3()
    };
    assert_eq!(rules::hopper_consumer_registers(&g), 128);
    assert_eq!(
        failed_rules(&g, HeadDim::D128, Target::Sm90),
        vec![Rule::RegisterFile]
    );
    let v = &g.violations(HeadDim::D128, Target::Sm90)[0];
    assert!(v.fix.contains("producer_regs"), "{}", v.fix);
    // With setmaxnreg the consumers get 160 and it fits; at D64 it fits without.
    let regs = Genome {
        producer_regs: ProducerRegs::R24,
        ..g
    };
    assert_eq!(rules::hopper_consumer_registers(&regs), 160);
    assert!(regs.is_valid(HeadDim::D128, Target::Sm90));
    assert!(g.is_valid(HeadDim::D64, Target::Sm90));
    assert_eq!(rules::hopper_consumer_registers(&fa3()), 240);
}

/// setmaxnreg.inc waits until the registers it asks for are free, and registers move only
/// inside the CTA's launch allocation: for every split, the producer's registers plus the
/// consumers' must fit in what the CTA was launched with, or the kernel hangs (a 2-WG,
/// 32-register-producer kernel asking for 240 hung on the H100).
#[test]
fn setmaxnreg_never_asks_for_more_than_the_launch_allocation() {
    for wgs in [ConsumerWgs::C1, ConsumerWgs::C2, ConsumerWgs::C3] {
        for p in [ProducerRegs::R24, ProducerRegs::R32, ProducerRegs::R40] {
            let g = Genome {
                consumer_wgs: wgs,
                producer_regs: p,
                ..fa3()
            };
            let (w, p) = (wgs.get(), p.get());
            let launch = 65536 / (128 * (w + 1)) / 8 * 8;
            let c = rules::hopper_consumer_registers(&g);
            assert!(
                c.is_multiple_of(8) && c <= 240,
                "{w} WGs, producer {p}: {c}"
            );
            assert!(
                p + w * c <= launch * (w + 1),
                "{w} WGs, producer {p}: consumers {c} ask for more than the producer frees"
            );
        }
    }
    let two_32 = Genome {
        producer_regs: ProducerRegs::R32,
        ..fa3()
    };
    assert_eq!(rules::hopper_consumer_registers(&two_32), 232);
}

#[test]
fn rule_pingpong_needs_two_warpgroups() {
    let one = Genome {
        consumer_wgs: ConsumerWgs::C1,
        ..fa3()
    };
    assert_eq!(
        failed_rules(&one, HeadDim::D64, Target::Sm90),
        vec![Rule::PingpongNeedsTwoWarpgroups]
    );
    let ok = Genome {
        pingpong: Switch::Off,
        ..one
    };
    assert!(ok.is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn hopper_genes_apply_to_the_hopper_family_only() {
    let g = fa3();
    assert!(g.genes().contains(&Gene::ConsumerWgs));
    assert!(!g.genes().contains(&Gene::QkMath));
    assert!(!fa2().genes().contains(&Gene::HopperLoad));
    // An Ampere gene of a Hopper genome does not change its kernel, nor its id.
    let same = g.with_allele(Gene::Warps, 0).with_allele(Gene::QkMath, 2);
    assert_eq!(same.canonical(), g.canonical());
    assert_eq!(same.id(), g.id());
    assert_ne!(g.with_allele(Gene::ConsumerWgs, 2).id(), g.id());
    // ... and a Hopper gene of an Ampere genome neither.
    let a = fa2().with_allele(Gene::ProducerRegs, 3);
    assert_eq!(a.id(), fa2().id());
    assert_eq!(g.rows_per_cta(), 128);
    assert_eq!(g.threads(), 384);
}

#[test]
fn ids_recorded_before_the_hopper_family_still_hold() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes");
    let champion = GenomeFile::load(&dir.join("champion-h100-seed.toml")).unwrap();
    assert_eq!(champion.genes.id().0, "84dacc9f4bdc0245");
}

#[test]
fn rule_hopper_needs_sm90() {
    let g = fa3();
    assert!(g.is_valid(HeadDim::D128, Target::Sm90));
    assert_eq!(
        failed_rules(&g, HeadDim::D64, Target::Sm89),
        vec![Rule::HopperNeedsSm90]
    );
    let v = &g.violations(HeadDim::D64, Target::Sm89)[0];
    assert!(v.to_string().contains("sm_90"), "{v}");
}

#[test]
fn hopper_shared_memory_plan_and_rule() {
    // Q 128x128 (32 KiB) + 2 stages of K and V 128x128 (128 KiB) + barriers and slack.
    let plan = fa3().smem(HeadDim::D128);
    assert_eq!(plan.total(), 32768 + 131072 + 1024 + 256);
    let big = Genome {
        consumer_wgs: ConsumerWgs::C3,
        stages: Stages::S4,
        ..fa3()
    };
    assert_eq!(
        failed_rules(&big, HeadDim::D128, Target::Sm90),
        vec![Rule::SharedMemory]
    );
    let v = &big.violations(HeadDim::D128, Target::Sm90)[0];
    assert!(v.fix.contains("consumer_wgs"), "{}", v.fix);
    assert!(big.is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn hopper_genomes_round_trip_through_toml_and_ampere_files_keep_16_genes() {
    let file = GenomeFile {
        name: "x".into(),
        description: String::new(),
        genes: fa3(),
    };
    let text = file.to_toml_string();
    assert!(text.contains("family = \"hopper\""), "{text}");
    assert!(text.contains("producer_regs = 24"), "{text}");
    let back = GenomeFile::from_toml_str(&text, Path::new("x.toml")).unwrap();
    assert_eq!(back.genes, fa3());
    let ampere = GenomeFile {
        genes: fa2(),
        ..file
    }
    .to_toml_string();
    assert!(
        !ampere.contains("family") && !ampere.contains("hopper_load"),
        "{ampere}"
    );
}

#[test]
fn sampling_one_family_gives_valid_canonical_genomes() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for _ in 0..200 {
        let g =
            space::sample_valid_in(&mut rng, Family::Hopper, HeadDim::D128, Target::Sm90).unwrap();
        assert_eq!(g.family, Family::Hopper);
        assert_eq!(g, g.canonical());
        assert!(g.is_valid(HeadDim::D128, Target::Sm90));
    }
    assert!(space::sample_valid_in(&mut rng, Family::Hopper, HeadDim::D64, Target::Sm89).is_none());
}

#[test]
fn genes_added_later_leave_recorded_ids_alone() {
    // The seed shape's champion of 2026-11-23, recorded on the H100 under this id
    // (experiments/2026-11-23-h100-champions/bench_f16.json) before the persistent gene
    // and the wider block_n existed.
    let g = Genome {
        family: Family::Hopper,
        consumer_wgs: ConsumerWgs::C1,
        block_n: BlockN::N128,
        stages: Stages::S1,
        exp: ExpFn::Exp2,
        producer_regs: ProducerRegs::R24,
        ..Genome::baseline()
    };
    assert_eq!(g.id().to_string(), "da747841b3d5e682");
    let persistent = Genome {
        persistent: Switch::On,
        ..g
    };
    assert_ne!(
        persistent.id(),
        g.id(),
        "a persistent kernel is another kernel"
    );
    assert_eq!(
        Genome {
            block_n: BlockN::N176,
            ..g
        }
        .allele_label(Gene::BlockN),
        "176"
    );
}

#[test]
fn a_persistent_cta_stages_o_apart_and_pays_for_it_in_shared_memory() {
    let g = fa3();
    let p = Genome {
        persistent: Switch::On,
        ..g
    };
    let (plain, pers) = (g.smem(HeadDim::D128), p.smem(HeadDim::D128));
    assert_eq!(plain.o, 0);
    assert_eq!(pers.o, pers.q);
    assert_eq!(pers.total(), plain.total() + 128 * 128 * 2);
    // FA3's 128 x 176 D128 tile fits with two stages, but not persistent.
    let wide = Genome {
        block_n: BlockN::N176,
        ..g
    };
    assert!(wide.is_valid(HeadDim::D128, Target::Sm90));
    let wide_pers = Genome {
        persistent: Switch::On,
        ..wide
    };
    assert_eq!(
        failed_rules(&wide_pers, HeadDim::D128, Target::Sm90),
        vec![Rule::SharedMemory]
    );
}
