//! Unit tests of the genes, rules, ids, files and space.

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;

fn fa2() -> Genome {
    Genome {
        qk_math: Math::Mma,
        pv_math: Math::Mma,
        p_path: Residence::Regs,
        o_accum: Residence::Regs,
        block_m: Tile::T64,
        block_n: BlockN::N64,
        warps: Warps::W4,
        producer_warps: ProducerWarps::P0,
        kv_load: KvLoad::CpAsync,
        stages: Stages::S2,
        smem_layout: SmemLayout::Swizzled,
        vec_bytes: VecBytes::V16,
        exp: ExpFn::Exp2,
        split_kv: SplitKv::K1,
        reg_cap: RegCap::None,
        min_blocks: MinBlocks::B1,
        ..Genome::baseline()
    }
}

fn failed_rules(g: &Genome, d: HeadDim, t: Target) -> Vec<Rule> {
    g.violations(d, t).into_iter().map(|v| v.rule).collect()
}

#[test]
fn allele_index_round_trips_for_every_gene_and_allele() {
    let base = Genome::baseline();
    for gene in Gene::ALL {
        for i in 0..gene.allele_count() {
            let g = base.with_allele(gene, i);
            assert_eq!(g.allele_index(gene), i, "{gene} allele {i}");
            assert_eq!(Genome::from_allele_indices(g.allele_indices()), g);
        }
    }
}

#[test]
fn every_gene_has_the_alleles_of_the_design() {
    let labels = |g: Gene| g.allele_labels().join(",");
    assert_eq!(labels(Gene::QkMath), "scalar,wmma,mma");
    assert_eq!(labels(Gene::PPath), "smem,regs");
    assert_eq!(labels(Gene::BlockM), "16,32,64,128");
    assert_eq!(labels(Gene::Warps), "1,2,4,8");
    assert_eq!(labels(Gene::ProducerWarps), "0,1,2");
    assert_eq!(labels(Gene::KvLoad), "direct,cp_async");
    assert_eq!(labels(Gene::Stages), "1,2,3,4");
    assert_eq!(labels(Gene::SmemLayout), "plain,padded,swizzled");
    assert_eq!(labels(Gene::VecBytes), "4,8,16");
    assert_eq!(
        labels(Gene::BlockN),
        "16,32,48,64,80,96,112,128,144,160,176,192,208,224,240,256"
    );
    assert_eq!(labels(Gene::Exp), "exp,exp2,exp2_fma");
    assert_eq!(labels(Gene::SplitKv), "1,2,4,8,16,32");
    assert_eq!(labels(Gene::RegCap), "none,64,96,128,168,255");
    assert_eq!(labels(Gene::MinBlocks), "1,2,3,4");
    assert_eq!(labels(Gene::Family), "ampere,hopper");
    assert_eq!(labels(Gene::ConsumerWgs), "1,2,3");
    assert_eq!(labels(Gene::HopperLoad), "tma,cp_async,direct");
    assert_eq!(labels(Gene::ProducerRegs), "none,24,32,40");
    assert_eq!(labels(Gene::Pingpong), "off,on");
    assert_eq!(labels(Gene::SoftmaxOverlap), "off,on,chained");
    assert_eq!(labels(Gene::Persistent), "off,on");
    assert_eq!(labels(Gene::PackGqa), "off,on");
    assert_eq!(labels(Gene::ClusterCombine), "off,on");
    // The 16 Ampere genes' product (859,963,392: 16 block_n, 3 exp and 6 split_kv
    // alleles) times the 9 added genes' (2 x 3 x 3 x 4 x 2 x 3 x 2 x 2 x 2).
    assert_eq!(total_size_of_product(), 859_963_392 * 3456);
}

fn total_size_of_product() -> u128 {
    space::total_size()
}

#[test]
fn rule_p_regs_needs_mma() {
    let ok = fa2();
    assert!(ok.is_valid(HeadDim::D64, Target::Sm90));
    let bad = Genome {
        qk_math: Math::Wmma,
        smem_layout: SmemLayout::Padded,
        ..ok
    };
    assert_eq!(
        failed_rules(&bad, HeadDim::D64, Target::Sm90),
        vec![Rule::PRegsNeedsMma]
    );
    let msg = bad.violations(HeadDim::D64, Target::Sm90)[0].to_string();
    assert!(
        msg.contains("p_regs_needs_mma") && msg.contains("fix:"),
        "{msg}"
    );
}

#[test]
fn rule_o_regs_needs_known_layout() {
    let ok = Genome {
        o_accum: Residence::Regs,
        ..Genome::baseline()
    };
    assert!(ok.is_valid(HeadDim::D64, Target::Sm89));
    let bad = Genome {
        pv_math: Math::Wmma,
        ..ok
    };
    assert_eq!(
        failed_rules(&bad, HeadDim::D64, Target::Sm89),
        vec![Rule::ORegsNeedsKnownLayout]
    );
}

#[test]
fn rule_swizzle_needs_addressed_loads() {
    let ok = Genome {
        smem_layout: SmemLayout::Swizzled,
        ..Genome::baseline()
    };
    assert!(ok.is_valid(HeadDim::D128, Target::Sm90));
    let bad = Genome {
        qk_math: Math::Wmma,
        ..ok
    };
    assert_eq!(
        failed_rules(&bad, HeadDim::D128, Target::Sm90),
        vec![Rule::SwizzleNeedsAddressedLoads]
    );
}

#[test]
fn rule_warp_rows_per_slice() {
    let ok = fa2(); // 64 rows, 4 warps: one m16 slice each
    assert!(ok.is_valid(HeadDim::D64, Target::Sm90));
    let bad = Genome {
        warps: Warps::W8,
        ..ok
    };
    assert_eq!(
        failed_rules(&bad, HeadDim::D64, Target::Sm90),
        vec![Rule::WarpRowsPerSlice]
    );
    // The same shape with everything in shared memory is fine: warps loop over slices.
    let smem = Genome {
        p_path: Residence::Smem,
        o_accum: Residence::Smem,
        ..bad
    };
    assert!(smem.is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn rule_register_file() {
    let ok = Genome {
        block_m: Tile::T128,
        warps: Warps::W8,
        ..fa2()
    };
    assert!(ok.is_valid(HeadDim::D128, Target::Sm90));
    // One warp owning 128 rows of O at D=128: 8 slices x 16 n-tiles x 4 = 512 floats.
    let bad = Genome {
        warps: Warps::W1,
        p_path: Residence::Smem,
        ..ok
    };
    assert_eq!(
        failed_rules(&bad, HeadDim::D128, Target::Sm90),
        vec![Rule::RegisterFile]
    );
}

#[test]
fn rule_shared_memory_depends_on_device_and_head_dim() {
    let g = Genome {
        block_m: Tile::T128,
        block_n: BlockN::N128,
        stages: Stages::S2,
        ..Genome::baseline()
    };
    // Q 32K + K/V 64K + S/P 100K + stats 1.5K + O 33K at D=64
    assert!(g.is_valid(HeadDim::D64, Target::Sm90));
    assert_eq!(
        failed_rules(&g, HeadDim::D64, Target::Sm89),
        vec![Rule::SharedMemory]
    );
    let msg = g.violations(HeadDim::D64, Target::Sm89)[0].to_string();
    assert!(msg.contains("sm_89") && msg.contains("bytes"), "{msg}");
}

#[test]
fn smem_plan_matches_the_formula() {
    let plan = fa2().smem(HeadDim::D64);
    assert_eq!(plan.q, 64 * 64 * 2);
    assert_eq!(plan.kv, 2 * 2 * 64 * 64 * 2);
    assert_eq!(plan.s_p, 0);
    assert_eq!(plan.o, 0);
    let padded = Genome {
        smem_layout: SmemLayout::Padded,
        p_path: Residence::Smem,
        o_accum: Residence::Smem,
        ..fa2()
    }
    .smem(HeadDim::D128);
    assert_eq!(padded.q, 64 * 136 * 2);
    assert_eq!(padded.s_p, 64 * 68 * 4 + 64 * 72 * 2);
    assert_eq!(padded.o, 64 * 132 * 4);
    assert_eq!(padded.total() % 16, 0);
}

#[test]
fn id_is_stable_and_ignores_text_layout() {
    let g = fa2();
    assert_eq!(g.id(), fa2().id());
    assert_eq!(g.id().0.len(), 16);
    let other = Genome {
        warps: Warps::W8,
        ..g
    };
    assert_ne!(g.id(), other.id());
    let file = GenomeFile {
        name: "x".into(),
        description: String::new(),
        genes: g,
    };
    let text = file.to_toml_string();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse(); // [genes] table lines reversed: still the same genome
    let genes_at = text.lines().position(|l| l == "[genes]").unwrap();
    let header: Vec<&str> = text.lines().take(genes_at + 1).collect();
    let body: Vec<&str> = text
        .lines()
        .skip(genes_at + 1)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let shuffled = format!("# comment\n{}\n{}\n", header.join("\n"), body.join("\n"));
    let parsed = GenomeFile::from_toml_str(&shuffled, Path::new("x.toml")).unwrap();
    assert_eq!(parsed.genes.id(), g.id());
    // Pinned: a change here means every recorded cache key and lineage id changes.
    assert_eq!(Genome::baseline().id().0, BASELINE_ID);
}

const BASELINE_ID: &str = "d031135b7f1bb2d3";

#[test]
fn toml_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for _ in 0..200 {
        let g = space::random_genome(&mut rng);
        let file = GenomeFile {
            name: "r".into(),
            description: "d".into(),
            genes: g,
        };
        // Genes that do not apply to the family are not written: what comes back is
        // the same kernel (the canonical genome, the same id).
        let back = GenomeFile::from_toml_str(&file.to_toml_string(), Path::new("r.toml")).unwrap();
        assert_eq!(back.genes.canonical(), g.canonical());
        assert_eq!(back.genes.id(), g.id());
        assert_eq!(
            (&back.name, &back.description),
            (&file.name, &file.description)
        );
        for gene in Gene::ALL.iter().filter(|x| !x.applies(g.family)) {
            assert!(
                !file
                    .to_toml_string()
                    .contains(&format!("\n{} =", gene.name())),
                "{} written for a {:?} genome",
                gene.name(),
                g.family
            );
        }
    }
}

#[test]
fn toml_errors_name_file_line_and_field() {
    let text = "name = \"x\"\n[genes]\nqk_math = \"tensor\"\n";
    let err = GenomeFile::from_toml_str(text, Path::new("genomes/x.toml")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("genomes/x.toml:3:"), "{msg}");
    assert!(msg.contains("tensor") && msg.contains("mma"), "{msg}");

    let fa2_text = GenomeFile {
        name: "x".into(),
        description: String::new(),
        genes: fa2(),
    }
    .to_toml_string();
    let bad_tile = fa2_text.replace("block_m = 64", "block_m = 48");
    let msg = GenomeFile::from_toml_str(&bad_tile, Path::new("g.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("48") && msg.contains("16, 32, 64, 128"),
        "{msg}"
    );
    let line = bad_tile
        .lines()
        .position(|l| l.starts_with("block_m"))
        .unwrap()
        + 1;
    assert!(msg.starts_with(&format!("g.toml:{line}:")), "{msg}");

    let missing = fa2_text.replace("warps = 4\n", "");
    let msg = GenomeFile::from_toml_str(&missing, Path::new("g.toml"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("missing field `warps`"), "{msg}");

    let unknown = fa2_text.replace("warps = 4\n", "warps = 4\nwrap = 2\n");
    let msg = GenomeFile::from_toml_str(&unknown, Path::new("g.toml"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("unknown field `wrap`"), "{msg}");
}

#[test]
fn reg_cap_reads_none_and_numbers() {
    let text = GenomeFile {
        name: "x".into(),
        description: String::new(),
        genes: fa2(),
    }
    .to_toml_string();
    assert!(text.contains("reg_cap = \"none\""), "{text}");
    let capped = text.replace("reg_cap = \"none\"", "reg_cap = 128");
    let g = GenomeFile::from_toml_str(&capped, Path::new("x")).unwrap();
    assert_eq!(g.genes.reg_cap, RegCap::R128);
    let bad = text.replace("reg_cap = \"none\"", "reg_cap = 100");
    assert!(GenomeFile::from_toml_str(&bad, Path::new("x")).is_err());
}

#[test]
fn free_genes_never_change_validity() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..3000 {
        let g = space::random_genome(&mut rng);
        for target in Target::ALL {
            for d in HeadDim::ALL {
                let valid = g.is_valid(d, target);
                for gene in space::free_genes() {
                    for i in 0..gene.allele_count() {
                        assert_eq!(
                            g.with_allele(gene, i).is_valid(d, target),
                            valid,
                            "{gene} changed validity of {}",
                            g.summary()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn valid_space_counts_are_consistent_with_sampling() {
    for &family in Family::ALL {
        let n = space::count_valid_in(family, HeadDim::D64, Target::Sm90);
        let total = space::family_size(family);
        assert!(n > 0 && n <= total, "{family}: {n} of {total}");
        // The valid fraction of the family's kernels, estimated by sampling canonical
        // genomes, agrees with the count.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let draws = 20_000;
        let hits = (0..draws)
            .filter(|_| {
                Genome {
                    family,
                    ..space::random_genome(&mut rng)
                }
                .canonical()
                .is_valid(HeadDim::D64, Target::Sm90)
            })
            .count();
        let estimated = hits as f64 / draws as f64;
        let exact = n as f64 / total as f64;
        assert!(
            (estimated - exact).abs() < 0.02,
            "{family}: {estimated} vs {exact}"
        );
    }
    let n = space::count_valid(HeadDim::D64, Target::Sm90);
    // More shared memory, more genomes; no Hopper kernel on sm_89.
    assert!(space::count_valid(HeadDim::D64, Target::Sm89) < n);
    assert!(space::count_valid(HeadDim::D128, Target::Sm90) < n);
    assert_eq!(
        space::count_valid_in(Family::Hopper, HeadDim::D64, Target::Sm89),
        0
    );
}

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
fn sampled_genomes_are_valid() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..500 {
        let g = space::sample_valid(&mut rng, HeadDim::D128, Target::Sm89);
        assert!(g.is_valid(HeadDim::D128, Target::Sm89));
    }
}

#[test]
fn named_genomes_load_and_are_valid_for_their_shapes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let file = GenomeFile::load(&path).unwrap();
            // Every named genome runs the seed shape (D=64) on both devices and D=128 on sm_90;
            // the seeds' 64x64 smem tiles at D=128 exceed the L4's 99 KB, as they would in CUDA.
            // Hopper genomes run on sm_90 only.
            let hopper = file.genes.family == Family::Hopper;
            for (d, t) in [
                (HeadDim::D64, Target::Sm89),
                (HeadDim::D64, Target::Sm90),
                (HeadDim::D128, Target::Sm90),
            ] {
                let v = file.genes.violations(d, t);
                if hopper && t == Target::Sm89 {
                    assert_eq!(v.len(), 1, "{}: {v:?}", path.display());
                    assert_eq!(v[0].rule, Rule::HopperNeedsSm90);
                } else {
                    assert!(v.is_empty(), "{}: {v:?}", path.display());
                }
            }
            names.push(file.name);
        }
    }
    names.sort();
    for seed in ["fa2", "fa3", "phase4", "phase6", "v3", "v5", "v6a", "v7a"] {
        assert!(names.iter().any(|n| n == seed), "missing {seed}");
    }
}

#[test]
fn problem_flops_and_labels() {
    let p = Problem::seed();
    assert_eq!(p.flops(), 4.0 * 8.0 * 512.0 * 512.0 * 64.0);
    assert_eq!(p.label(), "B1 H8 L512 D64 f16");
    let c = Problem {
        causal: true,
        q_len: 77,
        kv_len: 1000,
        ..p
    };
    assert_eq!(c.flops(), p.flops() / 512.0 / 512.0 * 77.0 * 1000.0 / 2.0);
    assert_eq!(c.label(), "B1 H8 Lq77 Lk1000 D64 f16 causal");
    assert!(Problem { batch: 0, ..p }
        .validate()
        .unwrap_err()
        .contains("batch"));
}

#[test]
fn problem_specs_parse_and_errors_say_the_form() {
    let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
    assert_eq!(p, Problem::seed());
    let c: Problem = "2,16,4096,4096,128,bf16,causal".parse().unwrap();
    assert!(c.causal && c.dtype == Dtype::Bf16 && c.head_dim == HeadDim::D128);
    for bad in [
        "1,8,512,512,80,f16",
        "1,8,512,512,64,f32",
        "1,8,512",
        "1,8,x,512,64,f16",
        "0,8,512,512,64,f16",
    ] {
        let err = bad.parse::<Problem>().unwrap_err();
        assert!(err.contains(bad) || err.contains("batch"), "{bad}: {err}");
    }
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
