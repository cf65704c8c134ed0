//! The Hopper backward family (`hopper_bwd`): its genes, rules, plans, id, file and space.

use super::*;

/// genomes/fa3-bwd.toml, written out.
fn fa3_bwd() -> Genome {
    Genome {
        family: Family::HopperBwd,
        block_m: Tile::T64,
        consumer_wgs: ConsumerWgs::C2,
        stages: Stages::S3,
        exp: ExpFn::Exp2,
        producer_regs: ProducerRegs::R32,
        dq_mode: DqMode::TmaReduce,
        ..Genome::baseline()
    }
}

fn with_dq(g: Genome, dq_mode: DqMode) -> Genome {
    Genome { dq_mode, ..g }
}

/// fa3-bwd with its dQ added from the registers (no staging in shared memory): the
/// plans of the rules below that are not about dQ.
fn fa3_bwd_atomic() -> Genome {
    with_dq(fa3_bwd(), DqMode::Atomic)
}

fn fa3_bwd_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa3-bwd.toml")
}

#[test]
fn the_fa3_bwd_file_loads_strictly_and_runs_at_d64_d96_d128_on_sm90_only() {
    let file = GenomeFile::load(&fa3_bwd_path()).unwrap();
    assert_eq!(file.genes, fa3_bwd());
    assert_eq!(file.genes.pass(), Pass::Backward);
    assert_eq!(
        file.genes.summary(),
        "hopper_bwd 128x64 wg2 s3 exp2 dq:tma_reduce regs:32"
    );
    assert_eq!((file.genes.threads(), file.genes.rows_per_cta()), (384, 64));
    for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128] {
        assert!(
            file.genes.violations(d, Target::Sm90).is_empty(),
            "D{d}: {:?}",
            file.genes.violations(d, Target::Sm90)
        );
        // The device rule first (its 3-stage plan exceeds the L4's 99 KiB besides).
        assert_eq!(
            failed_rules(&file.genes, d, Target::Sm89)[0],
            Rule::HopperNeedsSm90
        );
    }
    assert_eq!(
        failed_rules(&file.genes, HeadDim::D256, Target::Sm90)[0],
        Rule::RegisterFile
    );
    let back = GenomeFile::from_toml_str(&file.to_toml_string(), &fa3_bwd_path()).unwrap();
    assert_eq!(back.genes.id(), file.genes.id());
}

#[test]
fn a_hopper_bwd_file_states_its_genes_and_no_others() {
    let text = std::fs::read_to_string(fa3_bwd_path()).unwrap();
    let err = |t: &str| {
        GenomeFile::from_toml_str(t, Path::new("h.toml"))
            .unwrap_err()
            .to_string()
    };
    let msg = err(&text.replace("producer_regs = 32\n", ""));
    assert!(
        msg.contains("gene `producer_regs` is missing") && msg.contains("a hopper_bwd genome"),
        "{msg}"
    );
    // block_n is 64 per consumer warpgroup: no gene of the family.
    let msg = err(&text.replace("[genes]\n", "[genes]\nblock_n = 128\n"));
    assert!(
        msg.contains("gene `block_n` does not apply to the hopper_bwd family"),
        "{msg}"
    );
    let msg = err(&text.replace("[genes]\n", "[genes]\nwarps = 8\n"));
    assert!(
        msg.contains("gene `warps` does not apply to the hopper_bwd family")
            && msg.contains("\"ampere\" or \"ampere_bwd\""),
        "{msg}"
    );
    let msg = err(&text.replace("[genes]\n", "[genes]\npingpong = \"on\"\n"));
    assert!(msg.contains("set family = \"hopper\""), "{msg}");
}

#[test]
fn the_hopper_backward_family_has_its_own_genes() {
    let genes: Vec<&str> = fa3_bwd().genes().iter().map(|g| g.name()).collect();
    assert_eq!(
        genes,
        [
            "block_m",
            "stages",
            "exp",
            "family",
            "consumer_wgs",
            "producer_regs",
            "dq_mode",
            "dkv_split"
        ]
    );
    assert_eq!(Family::HopperBwd.pass(), Pass::Backward);
    assert!(Gene::DqMode.applies(Family::AmpereBwd) && Gene::DqMode.applies(Family::HopperBwd));
    // The forward families read the genes they read before.
    let forward = |f: Family| {
        Genome {
            family: f,
            ..Genome::baseline()
        }
        .genes()
        .len()
    };
    assert_eq!((forward(Family::Ampere), forward(Family::Hopper)), (18, 15));
    assert_eq!(Pass::Forward.genes().len(), GENES - 2);
}

#[test]
fn hopper_bwd_ids_hash_the_family_and_dq_mode() {
    let g = fa3_bwd();
    let ids: std::collections::HashSet<_> =
        DqMode::ALL.iter().map(|&m| with_dq(g, m).id()).collect();
    assert_eq!(ids.len(), 3);
    // Genes the family does not read change neither the kernel nor the id.
    let same = g
        .with_allele(Gene::BlockN, 7)
        .with_allele(Gene::Warps, 0)
        .with_allele(Gene::Pingpong, 1);
    assert_eq!(same.id(), g.id());
    assert_eq!(same.canonical(), g.canonical());
    assert_ne!(
        Genome {
            family: Family::Hopper,
            ..g
        }
        .id(),
        g.id()
    );
    // The forward's recorded ids stay pinned, whatever dq_mode holds.
    assert_eq!(
        with_dq(Genome::baseline(), DqMode::TmaReduce).id().0,
        BASELINE_ID
    );
    assert_eq!(with_dq(fa2(), DqMode::TmaReduce).id(), fa2().id());
}

#[test]
fn rule_hopper_needs_sm90_binds_the_backward_family() {
    let g = Genome {
        stages: Stages::S1,
        ..fa3_bwd_atomic()
    };
    let v = g.violations(HeadDim::D64, Target::Sm89);
    assert_eq!(v.len(), 1, "{v:?}");
    let msg = v[0].to_string();
    assert!(
        msg.contains("hopper_needs_sm90")
            && msg.contains("family = \"hopper_bwd\" on sm_89")
            && msg.contains("set family = \"ampere_bwd\""),
        "{msg}"
    );
}

#[test]
fn rule_hopper_bwd_block_m() {
    for (bm, ok) in [
        (Tile::T16, false),
        (Tile::T32, false),
        (Tile::T64, true),
        (Tile::T128, true),
    ] {
        let g = Genome {
            block_m: bm,
            ..fa3_bwd_atomic()
        };
        // D64: 128 rows a step fit the registers (64 + 128 + 32 + 8 = 232 of 232).
        let failed = failed_rules(&g, HeadDim::D64, Target::Sm90);
        assert_eq!(failed.is_empty(), ok, "block_m {bm}: {failed:?}");
        if !ok {
            assert_eq!(failed, [Rule::HopperBwdBlockM]);
            let msg = g.violations(HeadDim::D64, Target::Sm90)[0].to_string();
            assert!(msg.contains("set block_m = 64 or 128"), "{msg}");
        }
    }
}

#[test]
fn rule_hopper_bwd_exp_refuses_the_polynomial_only() {
    for (exp, ok) in [
        (ExpFn::Exp, true),
        (ExpFn::Exp2, true),
        (ExpFn::Exp2Fma, false),
    ] {
        let g = Genome { exp, ..fa3_bwd() };
        assert_eq!(g.is_valid(HeadDim::D128, Target::Sm90), ok, "{exp}");
    }
    let g = Genome {
        exp: ExpFn::Exp2Fma,
        ..fa3_bwd()
    };
    assert_eq!(
        failed_rules(&g, HeadDim::D128, Target::Sm90),
        [Rule::HopperBwdExp]
    );
    // exp is structural in this family alone: the forward's free genes are unchanged.
    assert!(space::structural_in(Family::HopperBwd).contains(&Gene::Exp));
    assert!(space::free_genes().contains(&Gene::Exp));
    for f in [Family::Ampere, Family::Hopper, Family::AmpereBwd] {
        assert!(space::free_genes_in(f).contains(&Gene::Exp), "{f}");
    }
}

#[test]
fn rule_tma_reduce_needs_hopper_bwd() {
    // The Ampere backward has no bulk reduce-add: a rule, with its fix.
    let fa2_bwd =
        GenomeFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa2-bwd.toml"))
            .unwrap()
            .genes;
    let bad = with_dq(fa2_bwd, DqMode::TmaReduce);
    for t in Target::ALL {
        assert_eq!(
            failed_rules(&bad, HeadDim::D64, t),
            [Rule::TmaReduceNeedsHopperBwd]
        );
    }
    let msg = bad.violations(HeadDim::D64, Target::Sm90)[0].to_string();
    assert!(
        msg.contains("tma_reduce_needs_hopper_bwd")
            && msg.contains("cp.reduce.async.bulk")
            && msg.contains("family = \"hopper_bwd\""),
        "{msg}"
    );
    // The Hopper backward takes every dq_mode, fa3-bwd's three stages included: the bulk
    // reduce-add stages one 64 x 64 fp32 unit per consumer warpgroup (32,768 bytes at
    // D128), which leaves main at 232,192 of the 232,448 bytes.
    for m in DqMode::ALL {
        assert!(
            with_dq(fa3_bwd(), *m).is_valid(HeadDim::D128, Target::Sm90),
            "{m}"
        );
    }
    assert_eq!(
        with_dq(fa3_bwd(), DqMode::TmaReduce)
            .smem(HeadDim::D128)
            .total(),
        232_192
    );
    // One consumer warpgroup stages both units of a D128 query block.
    let one = Genome {
        consumer_wgs: ConsumerWgs::C1,
        ..with_dq(fa3_bwd(), DqMode::TmaReduce)
    };
    assert_eq!(one.smem(HeadDim::D128).o, 32_768);
    assert_eq!(one.smem(HeadDim::D64).o, 16_384);
}

#[test]
fn rule_register_file_of_the_hopper_backward_and_d256() {
    // kernels/ABI.md's examples: D64 BM128 WGS2 producer 32 fits (232 <= 232), D128
    // BM64 (216) fits; D128 BM128 (296) and D128 without setmaxnreg (216 > 168) do not.
    let bm128 = Genome {
        block_m: Tile::T128,
        ..fa3_bwd_atomic()
    };
    assert_eq!(rules::hopper_bwd_consumer_needs(&bm128, HeadDim::D64), 232);
    assert_eq!(rules::hopper_consumer_registers(&bm128), 232);
    assert!(bm128.is_valid(HeadDim::D64, Target::Sm90));
    assert_eq!(
        rules::hopper_bwd_consumer_needs(&fa3_bwd(), HeadDim::D128),
        216
    );
    // At D128 128 rows a step need 296 registers (and their 3-stage ring's shared memory
    // exceeds 227 KiB besides).
    assert_eq!(
        failed_rules(&bm128, HeadDim::D128, Target::Sm90),
        [Rule::RegisterFile, Rule::SharedMemory]
    );
    for (g, fix) in [
        (
            Genome {
                stages: Stages::S1,
                ..bm128
            },
            "lower block_m to 64",
        ),
        (
            Genome {
                producer_regs: ProducerRegs::None,
                ..fa3_bwd()
            },
            "set producer_regs",
        ),
    ] {
        let v = g.violations(HeadDim::D128, Target::Sm90);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].rule, Rule::RegisterFile);
        assert!(v[0].fix.contains(fix), "{}", v[0]);
    }
    // D96 is stored 128 columns wide: it needs what D128 needs.
    assert!(!bm128.is_valid(HeadDim::D96, Target::Sm90));
    // D256: dK and dV alone are 256 registers a thread; split by keys no hopper_bwd
    // kernel exists, and the message names the split by columns as the fix (its kernels
    // are tests/dkv_split.rs's).
    let base = Genome {
        family: Family::HopperBwd,
        ..Genome::baseline()
    };
    let structural = space::structural_in(Family::HopperBwd);
    assert!(!space::product(base, &structural)
        .filter(|g| g.dkv_split == DkvSplit::Keys)
        .any(|g| g.is_valid(HeadDim::D256, Target::Sm90)));
    let v = fa3_bwd().violations(HeadDim::D256, Target::Sm90);
    assert_eq!(v[0].rule, Rule::RegisterFile, "{v:?}");
    let msg = v[0].to_string();
    assert!(
        msg.contains("register_file")
            && msg.contains("dkv_split = \"keys\"")
            && msg.contains("set dkv_split = \"columns\" with consumer_wgs = 2"),
        "{msg}"
    );
}

#[test]
fn hopper_backward_shared_memory_plans_match_the_abi() {
    // kernels/ABI.md: main = 1024 + 2*BN*Ds*2 + ST*2*BM*Ds*2 + (sep ? 0 : 2*BM*BN*2)
    // + (bulk ? WGS*ceil(BM/64*Ds/64 / WGS)*16384 : 0) + ST*2*BM*4 + 256, with BN = 64 *
    // WGS; split by columns (`EVO_DKV_COLUMNS`) BN = 64 * WGS / 2 and both dS^T and P^T
    // in two buffers each, 4*BM*BN*2, with the separate dq kernel too.
    let abi_main = |g: &Genome, d: u32| {
        let ds = d.div_ceil(64) * 64;
        let (w, bm, st) = (g.consumer_wgs.get(), g.block_m.get(), g.stages.get());
        let cols = g.dkv_split == DkvSplit::Columns;
        let bn = 64 * w / if cols { 2 } else { 1 };
        let sep = g.dq_mode == DqMode::Separate;
        let bulk = g.dq_mode == DqMode::TmaReduce;
        1024 + 2 * bn * ds * 2
            + st * 2 * bm * ds * 2
            + if cols {
                4 * bm * bn * 2
            } else if sep {
                0
            } else {
                2 * bm * bn * 2
            }
            + if bulk {
                w * (bm / 64 * ds / 64).div_ceil(w) * 16384
            } else {
                0
            }
            + st * 2 * bm * 4
            + 256
    };
    let abi_dq = |g: &Genome, d: u32| {
        let ds = d.div_ceil(64) * 64;
        let (w, st) = (g.consumer_wgs.get(), g.stages.get());
        if g.dq_mode != DqMode::Separate {
            return 0;
        }
        1024 + 2 * (64 * w) * ds * 2 + st * 2 * 64 * ds * 2 + 2 * (64 * w) * 4 + 256
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..300 {
        let g = space::sample_valid_in(&mut rng, Family::HopperBwd, HeadDim::D128, Target::Sm90)
            .unwrap();
        for d in HeadDim::ALL {
            assert_eq!(g.smem(d).total(), abi_main(&g, d.get()), "{}", g.summary());
            assert_eq!(
                SmemPlan::hopper_bwd_dq(&g, d).total(),
                abi_dq(&g, d.get()),
                "{}",
                g.summary()
            );
        }
    }
    // fa3-bwd at D128: 1024 + K,V 65536 + Q,dO 3 x 32768 + dS^T 32768 + dQ staging
    // 2 x 16384 + lse/dpsum 1536 + 256; without the staging (atomic adds) 199,424.
    assert_eq!(fa3_bwd().smem(HeadDim::D128).total(), 232_192);
    assert_eq!(fa3_bwd_atomic().smem(HeadDim::D128).total(), 199_424);
    // The Ampere backward's dq plan never sizes a Hopper genome, nor the reverse.
    assert_eq!(
        SmemPlan::bwd_dq(&with_dq(fa3_bwd(), DqMode::Separate), HeadDim::D64).total(),
        0
    );
}

#[test]
fn rule_shared_memory_binds_the_hopper_backward() {
    // Four stages of 128 rows at D64 with three consumer warpgroups: K,V 49152 + Q,dO
    // 131072 + dS^T 98304 + ... exceed 227 KiB.
    let g = Genome {
        consumer_wgs: ConsumerWgs::C1,
        block_m: Tile::T128,
        stages: Stages::S4,
        producer_regs: ProducerRegs::R24,
        ..fa3_bwd()
    };
    assert!(
        g.is_valid(HeadDim::D64, Target::Sm90),
        "{:?}",
        g.violations(HeadDim::D64, Target::Sm90)
    );
    let big = Genome {
        consumer_wgs: ConsumerWgs::C3,
        ..g
    };
    let v = big.violations(HeadDim::D64, Target::Sm90);
    assert!(v.iter().any(|v| v.rule == Rule::SharedMemory), "{v:?}");
    assert!(
        v.iter().any(|v| v.detail.contains("the main kernel's")),
        "{v:?}"
    );
}

#[test]
fn backward_spaces_hold_both_families_where_they_run() {
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    let mut families = std::collections::HashSet::new();
    for _ in 0..400 {
        let g = space::sample_valid_for_pass(Pass::Backward, &mut rng, HeadDim::D128, Target::Sm90)
            .unwrap();
        assert!(g.is_valid(HeadDim::D128, Target::Sm90));
        families.insert(g.family);
        let f = space::sample_valid(&mut rng, HeadDim::D128, Target::Sm90);
        assert_eq!(f.pass(), Pass::Forward);
    }
    assert_eq!(families.len(), 2, "{families:?}");
    for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128] {
        assert!(space::count_valid_in(Family::HopperBwd, d, Target::Sm90) > 0);
        assert_eq!(space::count_valid_in(Family::HopperBwd, d, Target::Sm89), 0);
    }
}
