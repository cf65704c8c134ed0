//! The backward family: its genes, rules, id, file and space.

use super::*;

fn fa2_bwd() -> Genome {
    Genome {
        family: Family::AmpereBwd,
        block_n: BlockN::N128,
        block_m: Tile::T64,
        warps: Warps::W8,
        kv_load: KvLoad::CpAsync,
        stages: Stages::S2,
        smem_layout: SmemLayout::Swizzled,
        vec_bytes: VecBytes::V16,
        exp: ExpFn::Exp2,
        dq_mode: DqMode::Atomic,
        reg_cap: RegCap::None,
        min_blocks: MinBlocks::B1,
        ..Genome::baseline()
    }
}

fn separate(g: Genome) -> Genome {
    Genome {
        dq_mode: DqMode::Separate,
        ..g
    }
}

#[test]
fn the_fa2_bwd_file_is_the_spec_genome_and_runs_where_it_should() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa2-bwd.toml");
    let file = GenomeFile::load(&path).unwrap();
    assert_eq!(file.genes, fa2_bwd());
    assert_eq!(file.genes.pass(), Pass::Backward);
    assert_eq!(
        file.genes.summary(),
        "ampere_bwd 128x64 w8 cp_async s2 swizzled v16 exp2 dq:atomic cap:none mb1"
    );
    assert_eq!((file.genes.threads(), file.genes.rows_per_cta()), (256, 64));
    for (d, t) in [
        (HeadDim::D64, Target::Sm89),
        (HeadDim::D64, Target::Sm90),
        (HeadDim::D128, Target::Sm90),
    ] {
        assert!(file.genes.violations(d, t).is_empty(), "D{d} {t}");
    }
    // K, V (64 KiB) and the Q/dO ring (64 KiB) at D128 exceed the L4's 99 KiB.
    assert_eq!(
        failed_rules(&file.genes, HeadDim::D128, Target::Sm89),
        [Rule::SharedMemory]
    );
    // Written back, it reads back strictly as the same kernel.
    let back = GenomeFile::from_toml_str(&file.to_toml_string(), &path).unwrap();
    assert_eq!(back.genes.id(), file.genes.id());
}

#[test]
fn the_backward_family_has_its_own_genes() {
    let genes: Vec<&str> = fa2_bwd().genes().iter().map(|g| g.name()).collect();
    assert_eq!(
        genes,
        [
            "block_m",
            "block_n",
            "warps",
            "kv_load",
            "stages",
            "smem_layout",
            "vec_bytes",
            "exp",
            "reg_cap",
            "min_blocks",
            "family",
            "dq_mode"
        ]
    );
    for family in [Family::Ampere, Family::Hopper] {
        assert!(!Gene::DqMode.applies(family));
        assert_eq!(family.pass(), Pass::Forward);
    }
    assert_eq!(
        Pass::Backward.families().collect::<Vec<_>>(),
        [Family::AmpereBwd, Family::HopperBwd]
    );
    assert!(!Pass::Forward.genes().contains(&Gene::DqMode));
    assert!(!Pass::Forward.genes().contains(&Gene::DkvSplit));
    assert_eq!(Pass::Forward.genes().len(), GENES - 2);
}

#[test]
fn backward_ids_hash_the_family_and_dq_mode_and_forward_ids_are_unchanged() {
    let g = fa2_bwd();
    assert_ne!(separate(g).id(), g.id());
    // Genes the family does not read change neither the kernel nor the id.
    let same = g.with_allele(Gene::QkMath, 2).with_allele(Gene::SplitKv, 3);
    assert_eq!(same.id(), g.id());
    assert_eq!(same.canonical(), g.canonical());
    // The Ampere genome with the same genes is another kernel (the family is hashed).
    assert_ne!(
        Genome {
            family: Family::Ampere,
            ..g
        }
        .id(),
        g.id()
    );
    // A forward genome's id never sees dq_mode; the recorded ids stay pinned.
    assert_eq!(separate(fa2()).id(), fa2().id());
    assert_eq!(separate(Genome::baseline()).id().0, BASELINE_ID);
}

#[test]
fn rule_bwd_keys_per_warp() {
    let g = fa2_bwd();
    // 8 warps of 16 keys: 128 is the least block_n.
    let bad = Genome {
        block_n: BlockN::N64,
        ..g
    };
    assert_eq!(
        failed_rules(&bad, HeadDim::D64, Target::Sm90),
        [Rule::BwdKeysPerWarp]
    );
    let msg = bad.violations(HeadDim::D64, Target::Sm90)[0].to_string();
    assert!(
        msg.contains("bwd_keys_per_warp") && msg.contains("lower warps to at most 4"),
        "{msg}"
    );
    assert!(Genome {
        warps: Warps::W4,
        ..bad
    }
    .is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn rule_bwd_dq_rows_per_warp_binds_the_separate_dq_kernel_only() {
    // 64 rows over 8 warps: not whole 16-row slices for a warp that owns rows.
    let g = fa2_bwd();
    assert!(g.is_valid(HeadDim::D64, Target::Sm90));
    assert_eq!(
        failed_rules(&separate(g), HeadDim::D64, Target::Sm90),
        [Rule::BwdDqRowsPerWarp]
    );
    let msg = separate(g).violations(HeadDim::D64, Target::Sm90)[0].to_string();
    assert!(
        msg.contains("bwd_dq_rows_per_warp") && msg.contains("dq_mode = \"atomic\""),
        "{msg}"
    );
    let fixed = separate(Genome {
        block_m: Tile::T128,
        ..g
    });
    assert!(fixed.is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn rule_register_file_of_the_backward_kernels() {
    let g = fa2_bwd();
    // dK and dV: 2 x 128 keys x D / 256 threads = D registers, + 40: at D128 with 8
    // warps they fit, with 4 they do not.
    assert_eq!(rules::bwd_main_accumulators(&g, HeadDim::D128), 128);
    let four = Genome {
        warps: Warps::W4,
        ..g
    };
    assert_eq!(
        failed_rules(&four, HeadDim::D128, Target::Sm90),
        [Rule::RegisterFile]
    );
    assert!(g.is_valid(HeadDim::D128, Target::Sm90));
    // The dq kernel's dQ: 128 rows x D128 over one warp is 512 registers a thread,
    // while the main kernel's 16 keys need 128.
    let one_warp = Genome {
        block_n: BlockN::N16,
        block_m: Tile::T128,
        warps: Warps::W1,
        ..g
    };
    assert!(one_warp.is_valid(HeadDim::D128, Target::Sm90));
    let v = separate(one_warp).violations(HeadDim::D128, Target::Sm90);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::RegisterFile);
    assert!(v[0].detail.contains("dq kernel"), "{}", v[0]);
}

#[test]
fn backward_shared_memory_plans_match_the_spec() {
    let g = fa2_bwd();
    // main = K,V 2*BN*D*2 + ring S*2*BM*D*2 + lse/dpsum S*2*BM*4 + dS^T BN*(BM+8)*2.
    let main = g.smem(HeadDim::D128);
    assert_eq!(main, SmemPlan::bwd_main(&g, HeadDim::D128));
    assert_eq!(
        main.total(),
        2 * 128 * 128 * 2 + 2 * 2 * 64 * 128 * 2 + 2 * 2 * 64 * 4 + 128 * 72 * 2
    );
    assert_eq!(SmemPlan::bwd_dq(&g, HeadDim::D128).total(), 0);
    let padded = separate(Genome {
        smem_layout: SmemLayout::Padded,
        block_m: Tile::T128,
        ..g
    });
    // dq = Q,dO 2*BM*pitch*2 + ring S*2*BN*pitch*2 + lse/dpsum 2*BM*4, pitch = D + 8.
    assert_eq!(
        SmemPlan::bwd_dq(&padded, HeadDim::D64).total(),
        2 * 128 * 72 * 2 + 2 * 2 * 128 * 72 * 2 + 2 * 128 * 4
    );
    assert_eq!(
        padded.smem(HeadDim::D64).total(),
        2 * 128 * 72 * 2 + 2 * 2 * 128 * 72 * 2 + 2 * 2 * 128 * 4 + 128 * 136 * 2
    );
    // The forward's plans of the forward genomes do not move.
    assert_eq!(SmemPlan::bwd_dq(&fa2(), HeadDim::D64).total(), 0);
}

#[test]
fn rule_shared_memory_binds_each_backward_kernel() {
    // A wide K/V ring of four stages: the dq kernel (106,752 bytes) exceeds the L4's
    // 99 KiB while the main kernel (66,048) fits.
    let g = Genome {
        block_n: BlockN::N96,
        block_m: Tile::T32,
        warps: Warps::W2,
        stages: Stages::S4,
        ..fa2_bwd()
    };
    assert_eq!(g.smem(HeadDim::D64).total(), 66_048);
    assert!(g.is_valid(HeadDim::D64, Target::Sm89));
    let v = separate(g).violations(HeadDim::D64, Target::Sm89);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::SharedMemory);
    assert!(
        v[0].detail.contains("the dq kernel's 106752 bytes"),
        "{}",
        v[0]
    );
    assert!(separate(g).is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn backward_kernels_exist_up_to_d128_and_d256_keeps_too_many_accumulators() {
    for t in Target::ALL {
        for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128] {
            assert!(
                space::count_valid_in(Family::AmpereBwd, d, t) > 0,
                "D{d} {t}"
            );
        }
        // A warp owns at least 16 keys, and their dK and dV rows over all 256 columns
        // are 2 x 16 x 256 / 32 = 256 registers a thread: none fits at D256.
        assert_eq!(
            space::count_valid_in(Family::AmpereBwd, HeadDim::D256, t),
            0
        );
    }
    let g = Genome {
        block_n: BlockN::N16,
        block_m: Tile::T16,
        warps: Warps::W1,
        stages: Stages::S1,
        ..fa2_bwd()
    };
    assert_eq!(rules::bwd_main_accumulators(&g, HeadDim::D256), 256);
    assert_eq!(
        failed_rules(&g, HeadDim::D256, Target::Sm89),
        [Rule::RegisterFile]
    );
}

#[test]
fn forward_spaces_never_hold_a_backward_genome_and_the_backward_space_no_forward_one() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    for _ in 0..2000 {
        let f = space::random_genome(&mut rng);
        assert_eq!(f.pass(), Pass::Forward);
        assert_eq!(f.dq_mode, DqMode::Atomic, "dq_mode stays at its baseline");
        assert_eq!(
            space::sample_valid(&mut rng, HeadDim::D64, Target::Sm90).pass(),
            Pass::Forward
        );
        let b = space::sample_valid_for_pass(Pass::Backward, &mut rng, HeadDim::D128, Target::Sm89)
            .unwrap();
        assert_eq!(b.family, Family::AmpereBwd);
        assert!(b.is_valid(HeadDim::D128, Target::Sm89));
    }
    assert_eq!(
        space::total_size(),
        space::total_size_for_pass(Pass::Forward)
    );
    assert_eq!(
        space::count_valid(HeadDim::D64, Target::Sm90),
        space::count_valid_in(Family::Ampere, HeadDim::D64, Target::Sm90)
            + space::count_valid_in(Family::Hopper, HeadDim::D64, Target::Sm90)
    );
    assert_eq!(
        space::count_valid_for_pass(Pass::Backward, HeadDim::D64, Target::Sm90),
        space::count_valid_in(Family::AmpereBwd, HeadDim::D64, Target::Sm90)
            + space::count_valid_in(Family::HopperBwd, HeadDim::D64, Target::Sm90)
    );
    // The backward's product: its two families over the genes of either (consumer_wgs,
    // producer_regs and dkv_split are hopper_bwd's, the rest ampere_bwd's or both).
    assert_eq!(
        space::total_size_for_pass(Pass::Backward),
        2 * space::family_size(Family::AmpereBwd) * 3 * 4 * 2
    );
}

#[test]
fn a_backward_file_states_its_genes_and_no_others() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa2-bwd.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let err = |t: &str| {
        GenomeFile::from_toml_str(t, Path::new("b.toml"))
            .unwrap_err()
            .to_string()
    };
    let msg = err(&text.replace("dq_mode = \"atomic\"\n", ""));
    assert!(
        msg.contains("gene `dq_mode` is missing")
            && msg.contains("an ampere_bwd genome")
            && msg.contains("dq_mode = one of \"atomic\", \"separate\", \"tma_reduce\""),
        "{msg}"
    );
    let msg = err(&text.replace("warps = 8\n", ""));
    assert!(msg.contains("gene `warps` is missing"), "{msg}");
    let msg = err(&text.replace("[genes]\n", "[genes]\nqk_math = \"mma\"\n"));
    assert!(
        msg.contains("gene `qk_math` does not apply to the ampere_bwd family")
            && msg.contains("set family = \"ampere\""),
        "{msg}"
    );
    let msg = err(&text.replace("[genes]\n", "[genes]\nsplit_kv = 1\n"));
    assert!(
        msg.contains("gene `split_kv` does not apply to the ampere_bwd family")
            && msg.contains("\"ampere\" or \"hopper\""),
        "{msg}"
    );
    // A forward file may not state dq_mode.
    let fa2_text = std::fs::read_to_string(path.with_file_name("fa2.toml")).unwrap();
    let msg = err(&fa2_text.replace("[genes]\n", "[genes]\ndq_mode = \"atomic\"\n"));
    assert!(
        msg.contains("gene `dq_mode` does not apply to the ampere family")
            && msg.contains("set family = \"ampere_bwd\" or \"hopper_bwd\""),
        "{msg}"
    );
    // A record (the lenient serde form) may leave dq_mode at its default out.
    let record = toml::to_string(&fa2_bwd()).unwrap();
    assert!(!record.contains("dq_mode"), "{record}");
    let back: Genome = toml::from_str(&record).unwrap();
    assert_eq!(back.id(), fa2_bwd().id());
    let record = toml::to_string(&separate(fa2_bwd())).unwrap();
    let back: Genome = toml::from_str(&record).unwrap();
    assert_eq!(back.dq_mode, DqMode::Separate);
}
