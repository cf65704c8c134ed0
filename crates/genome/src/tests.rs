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
    assert_eq!(labels(Gene::Family), "ampere,hopper,ampere_bwd,hopper_bwd");
    assert_eq!(labels(Gene::ConsumerWgs), "1,2,3");
    assert_eq!(labels(Gene::HopperLoad), "tma,cp_async,direct");
    assert_eq!(labels(Gene::ProducerRegs), "none,24,32,40");
    assert_eq!(labels(Gene::Pingpong), "off,on");
    assert_eq!(labels(Gene::SoftmaxOverlap), "off,on,chained");
    assert_eq!(labels(Gene::Persistent), "off,on");
    assert_eq!(labels(Gene::PackGqa), "off,on");
    assert_eq!(labels(Gene::ClusterCombine), "off,on");
    assert_eq!(labels(Gene::OStore), "staged,direct,tma");
    assert_eq!(labels(Gene::WgSplit), "rows,keys");
    assert_eq!(labels(Gene::DqMode), "atomic,separate,tma_reduce");
    assert_eq!(labels(Gene::DkvSplit), "keys,columns");
    // The forward's product: the 16 Ampere genes' (859,963,392: 16 block_n, 3 exp and
    // 6 split_kv alleles) times the 11 added forward genes' (2 forward families x 3 x 3
    // x 4 x 2 x 3 x 2 x 2 x 2 x 3 x 2); `dq_mode` and `dkv_split` shape no forward kernel.
    assert_eq!(total_size_of_product(), 859_963_392 * 20736);
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
    assert!(msg.contains("gene `warps` is missing"), "{msg}");

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
                    ..space::random_genome_for_pass(family.pass(), &mut rng)
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
fn named_genomes_load_and_are_valid_for_their_shapes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let file = GenomeFile::load(&path).unwrap();
            // Every named genome runs the seed shape (D=64) on both devices and D=128 on sm_90;
            // the seeds' 64x64 smem tiles at D=128 exceed the L4's 99 KB, as they would in CUDA.
            // Hopper genomes run on sm_90 only (the device rule fails first; a Hopper
            // backward's plan exceeds the L4's 99 KiB besides).
            // A Hopper backward split by columns (fa3-bwd-d256) runs where each half of
            // the columns is whole 64-column blocks: D128 and D256, never D64.
            let hopper = matches!(file.genes.family, Family::Hopper | Family::HopperBwd);
            if file.genes.dkv_split == DkvSplit::Columns {
                for d in [HeadDim::D128, HeadDim::D256] {
                    let v = file.genes.violations(d, Target::Sm90);
                    assert!(v.is_empty(), "{}: {v:?}", path.display());
                }
                let v = file.genes.violations(HeadDim::D64, Target::Sm90);
                assert_eq!(v.len(), 1, "{}: {v:?}", path.display());
                assert_eq!(v[0].rule, Rule::HopperBwdDkvColumns);
                names.push(file.name);
                continue;
            }
            for (d, t) in [
                (HeadDim::D64, Target::Sm89),
                (HeadDim::D64, Target::Sm90),
                (HeadDim::D128, Target::Sm90),
            ] {
                let v = file.genes.violations(d, t);
                if hopper && t == Target::Sm89 {
                    let backward = file.genes.pass() == Pass::Backward;
                    assert!(v.len() == 1 || backward, "{}: {v:?}", path.display());
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
fn sampled_genomes_are_valid() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..500 {
        let g = space::sample_valid(&mut rng, HeadDim::D128, Target::Sm89);
        assert!(g.is_valid(HeadDim::D128, Target::Sm89));
    }
}

mod backward;
mod hopper;
mod hopper_backward;

/// `is_valid` checks the rules without describing a failure (the search calls it for
/// every candidate it weighs); it must say exactly what `violations` says.
#[test]
fn is_valid_agrees_with_the_violations_it_does_not_describe() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let (mut valid, mut invalid) = (0, 0);
    for _ in 0..5_000 {
        let g = space::random_genome(&mut rng);
        for d in HeadDim::ALL {
            for t in Target::ALL {
                let v = g.violations(d, t);
                assert_eq!(
                    g.is_valid(d, t),
                    v.is_empty(),
                    "{} at D{d} on {t}: {v:?}",
                    g.summary()
                );
                if v.is_empty() {
                    valid += 1;
                } else {
                    invalid += 1;
                }
            }
        }
    }
    assert!(
        valid > 100 && invalid > 100,
        "{valid} valid, {invalid} invalid"
    );
}
