//! The Hopper backward's `dkv_split` gene (kernels/attention_bwd_sm90.cu): split by
//! columns, two consumer warpgroups share 64 keys, each computes Sᵀ and dPᵀ for half the
//! step's query rows, leaves Pᵀ and dSᵀ in shared memory and holds dK and dV of half the
//! stored columns (FlashAttention-3's D256 layout). Its alleles, its family, its TOML
//! form and its place in the id and the summary, its rules, its budgets, and the D256
//! backward it makes possible.

use evo_genome::rules::{self, HOPPER_ALIGN_SLACK, HOPPER_BARRIERS, HOPPER_BWD_ADDRESS_REGS};
use evo_genome::{
    space, ConsumerWgs, DkvSplit, DqMode, ExpFn, Family, Gene, Genome, GenomeFile, HeadDim,
    ProducerRegs, Rule, SmemPlan, Stages, Target, Tile,
};
use std::path::{Path, PathBuf};

mod common;
use common::{fa3, failed};

fn repo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name)
}

/// genomes/fa3-bwd.toml: two consumer warpgroups of 64 keys each.
fn fa3_bwd() -> Genome {
    GenomeFile::load(&repo("genomes/fa3-bwd.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .genes
}

/// fa3-bwd split by columns, 64-row steps, dQ by red adds: valid at D256 with one or two
/// stages.
fn columns() -> Genome {
    Genome {
        dkv_split: DkvSplit::Columns,
        block_m: Tile::T64,
        stages: Stages::S2,
        dq_mode: DqMode::Atomic,
        ..fa3_bwd()
    }
}

#[test]
fn the_gene_has_two_alleles_and_shapes_the_hopper_backward_only() {
    assert_eq!(Gene::DkvSplit.allele_labels(), vec!["keys", "columns"]);
    assert_eq!(Gene::from_name("dkv_split"), Some(Gene::DkvSplit));
    assert_eq!(DkvSplit::default(), DkvSplit::Keys);
    assert_eq!(Genome::baseline().dkv_split, DkvSplit::Keys);
    assert!(!Gene::DkvSplit.is_ordered());
    for f in Family::ALL {
        assert_eq!(Gene::DkvSplit.applies(*f), *f == Family::HopperBwd, "{f}");
    }
    let g = columns();
    assert_eq!(g.allele_label(Gene::DkvSplit), "columns");
    assert_eq!(g.allele_index(Gene::DkvSplit), 1);
    assert_eq!(
        g.with_allele(Gene::DkvSplit, 0).dkv_split,
        DkvSplit::Keys,
        "with_allele sets it"
    );
    assert!(space::structural_in(Family::HopperBwd).contains(&Gene::DkvSplit));
    // A forward or Ampere backward genome holds it at its default, whatever was drawn.
    let ampere_bwd = Genome {
        family: Family::AmpereBwd,
        dkv_split: DkvSplit::Columns,
        ..Genome::baseline()
    };
    assert_eq!(ampere_bwd.canonical().dkv_split, DkvSplit::Keys);
    let forward = Genome {
        dkv_split: DkvSplit::Columns,
        ..fa3()
    };
    assert_eq!(forward.id(), fa3().id());
    assert_eq!(forward.summary(), fa3().summary());
    assert!(!forward.genes().contains(&Gene::DkvSplit));
    assert_eq!(
        ampere_bwd.id(),
        Genome {
            dkv_split: DkvSplit::Keys,
            ..ampere_bwd
        }
        .id()
    );
}

#[test]
fn keys_is_left_out_of_the_toml_written_the_id_and_the_summary() {
    let keys = fa3_bwd();
    assert_eq!(keys.dkv_split, DkvSplit::Keys);
    // fa3-bwd's id as the backward searches recorded it (experiments/2026-11-27-h100-bwd-
    // bulk/s1), before the gene existed: unchanged.
    assert_eq!(keys.id().0, "f051fd3125fb82bb");
    assert_eq!(
        keys.summary(),
        "hopper_bwd 128x64 wg2 s3 exp2 dq:tma_reduce regs:32"
    );
    // A record (the lenient serde form) leaves the default out, and one without the
    // field reads as keys: the same genome, the same id.
    let record = toml::to_string(&keys).unwrap();
    assert!(!record.contains("dkv_split"), "{record}");
    let back: Genome = toml::from_str(&record).unwrap();
    assert_eq!(back, keys);
    assert_eq!(back.id(), keys.id());
    // Columns is written, hashed and summarised.
    let split = Genome {
        dkv_split: DkvSplit::Columns,
        ..keys
    };
    let record = toml::to_string(&split).unwrap();
    assert!(record.contains("dkv_split = \"columns\""), "{record}");
    assert_eq!(toml::from_str::<Genome>(&record).unwrap(), split);
    assert_ne!(split.id(), keys.id());
    assert_eq!(
        split.summary(),
        "hopper_bwd 64x64 wg2 s3 exp2 dq:tma_reduce regs:32 split:columns"
    );
    // A genome file states every gene of its family, this one included.
    let file = GenomeFile {
        name: "c".into(),
        description: String::new(),
        genes: split,
    };
    let written = file.to_toml_string();
    assert!(written.contains("dkv_split = \"columns\""), "{written}");
    assert_eq!(
        GenomeFile::from_toml_str(&written, Path::new("c.toml"))
            .unwrap()
            .genes,
        split
    );
    let text = std::fs::read_to_string(repo("genomes/fa3-bwd.toml")).unwrap();
    let err = GenomeFile::from_toml_str(
        &text.replace("dkv_split = \"keys\"\n", ""),
        Path::new("h.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("gene `dkv_split` is missing")
            && err.contains("dkv_split = one of \"keys\", \"columns\""),
        "{err}"
    );
    // A misspelt allele names the alleles; a forward file may not state the gene.
    let err = GenomeFile::from_toml_str(
        &text.replace("dkv_split = \"keys\"", "dkv_split = \"cols\""),
        Path::new("h.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("h.toml") && err.contains("columns"), "{err}");
    let fa3 = std::fs::read_to_string(repo("genomes/fa3.toml")).unwrap();
    let err = GenomeFile::from_toml_str(
        &fa3.replace("[genes]\n", "[genes]\ndkv_split = \"keys\"\n"),
        Path::new("f.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("gene `dkv_split` does not apply to the hopper family")
            && err.contains("family = \"hopper_bwd\""),
        "{err}"
    );
}

#[test]
fn rule_hopper_bwd_dkv_pairs_needs_two_consumer_warpgroups() {
    let d = HeadDim::D128;
    assert!(
        columns().is_valid(d, Target::Sm90),
        "{:?}",
        failed(&columns(), d)
    );
    for (wgs, why) in [(ConsumerWgs::C1, "no partner"), (ConsumerWgs::C3, "alone")] {
        let g = Genome {
            consumer_wgs: wgs,
            stages: Stages::S1,
            ..columns()
        };
        assert_eq!(failed(&g, d), [Rule::HopperBwdDkvPairs], "{wgs}");
        let v = &g.violations(d, Target::Sm90)[0];
        let msg = v.to_string();
        assert!(
            msg.contains("hopper_bwd_dkv_pairs")
                && v.detail.contains(&format!(
                    "dkv_split = \"columns\" with consumer_wgs = {wgs}"
                ))
                && v.detail.contains(why)
                && v.fix == "set consumer_wgs = 2, or dkv_split = \"keys\"",
            "{msg}"
        );
        // Split by keys, the same warpgroups are no pair and need none.
        let keys = Genome {
            dkv_split: DkvSplit::Keys,
            ..g
        };
        assert!(!failed(&keys, d).contains(&Rule::HopperBwdDkvPairs));
    }
}

#[test]
fn rule_hopper_bwd_dkv_columns_needs_halves_of_whole_64_column_blocks() {
    for (d, ok) in [
        (HeadDim::D64, false),
        (HeadDim::D96, true),
        (HeadDim::D128, true),
        (HeadDim::D256, true),
    ] {
        let f = failed(&columns(), d);
        assert_eq!(!f.contains(&Rule::HopperBwdDkvColumns), ok, "D{d}: {f:?}");
    }
    assert_eq!(
        failed(&columns(), HeadDim::D64),
        [Rule::HopperBwdDkvColumns]
    );
    let v = &columns().violations(HeadDim::D64, Target::Sm90)[0];
    assert!(
        v.detail.contains("D = 64")
            && v.detail.contains("32 columns")
            && v.fix
                == "set dkv_split = \"keys\" (at D = 64 one warpgroup's dK and dV fit its \
                    registers)",
        "{v}"
    );
    assert!(v.to_string().contains("hopper_bwd_dkv_columns"), "{v}");
    // Both rules at once: D64 with three warpgroups.
    let three = Genome {
        consumer_wgs: ConsumerWgs::C3,
        stages: Stages::S1,
        ..columns()
    };
    assert_eq!(
        failed(&three, HeadDim::D64),
        [Rule::HopperBwdDkvPairs, Rule::HopperBwdDkvColumns]
    );
    // Split by keys, D64 is fa3-bwd's own head dim.
    assert!(fa3_bwd().is_valid(HeadDim::D64, Target::Sm90));
}

#[test]
fn the_budgets_at_d256_with_64_row_steps() {
    let d = HeadDim::D256;
    let g = columns();
    // 64 keys per pair of warpgroups; the template's macros say so.
    assert_eq!(rules::hopper_bwd_block_n(&g), 64);
    assert_eq!(rules::hopper_bwd_split(&g), 2);
    assert_eq!(rules::hopper_bwd_block_n(&fa3_bwd()), 128);
    // Registers: dK, dV 256/2 + Sᵀ, dPᵀ 64/2 + P 64/4/2 + 8 = 128 + 32 + 8 + 8.
    assert_eq!(rules::hopper_bwd_consumer_needs(&g, d), 176);
    assert_eq!(HOPPER_BWD_ADDRESS_REGS, 8);
    // Split by keys: 256 + 64 + 16 + 8.
    let keys = Genome {
        dkv_split: DkvSplit::Keys,
        ..g
    };
    assert_eq!(rules::hopper_bwd_consumer_needs(&keys, d), 344);
    // At D128 with 128-row steps, split: 64 + 64 + 16 + 8.
    let bm128 = Genome {
        block_m: Tile::T128,
        ..g
    };
    assert_eq!(rules::hopper_bwd_consumer_needs(&bm128, HeadDim::D128), 152);
    // Shared memory, two stages, red adds: K, V 2 x 64 x 256 x 2; Q, dO 2 x 2 x 64 x 256
    // x 2; dSᵀ and Pᵀ two buffers each of 64 x 64 x 2; lse, dpsum 2 x 2 x 64 x 4.
    let plan = SmemPlan::hopper_bwd_main(&g, d);
    assert_eq!(plan.kv, 65_536);
    assert_eq!(plan.q, 131_072);
    assert_eq!(plan.s_p, 32_768);
    assert_eq!(plan.o, 0);
    assert_eq!(
        plan.stats,
        2 * 2 * 64 * 4 + HOPPER_BARRIERS + HOPPER_ALIGN_SLACK
    );
    assert_eq!(plan.total(), 231_680);
    assert_eq!(g.smem(d), plan);
    // dSᵀ and Pᵀ stay with the separate dq kernel: the pair reads them for dK and dV.
    let separate = Genome {
        dq_mode: DqMode::Separate,
        stages: Stages::S1,
        ..g
    };
    assert_eq!(separate.smem(d).s_p, 32_768);
    assert_eq!(separate.smem(d).total(), 165_632);
    assert_eq!(SmemPlan::hopper_bwd_dq(&separate, d).total(), 198_912);
    // Keys (the default) keeps its plan: no Pᵀ, no dSᵀ with the dq kernel.
    assert_eq!(
        Genome {
            dkv_split: DkvSplit::Keys,
            ..separate
        }
        .smem(HeadDim::D128)
        .s_p,
        0
    );
    // The bulk adds: one stage, 4 units of 64 x 64 fp32 dealt over 2 warpgroups.
    let bulk = Genome {
        dq_mode: DqMode::TmaReduce,
        stages: Stages::S1,
        ..g
    };
    assert_eq!(rules::hopper_bwd_dq_slots(&bulk, d), 2);
    assert_eq!(bulk.smem(d).o, 65_536);
    assert_eq!(bulk.smem(d).total(), 231_168);
}

#[test]
fn d256_runs_split_by_columns_and_never_by_keys() {
    let d = HeadDim::D256;
    assert!(
        columns().is_valid(d, Target::Sm90),
        "{:?}",
        columns().violations(d, Target::Sm90)
    );
    // Split by keys no D256 kernel fits; the register rule names the split as the fix.
    let keys = Genome {
        dkv_split: DkvSplit::Keys,
        ..columns()
    };
    let v = keys.violations(d, Target::Sm90);
    assert_eq!(v[0].rule, Rule::RegisterFile, "{v:?}");
    assert!(
        v[0].detail.contains("344 registers")
            && v[0].detail.contains("dkv_split = \"keys\"")
            && v[0]
                .fix
                .contains("set dkv_split = \"columns\" with consumer_wgs = 2"),
        "{}",
        v[0]
    );
    // Without setmaxnreg the split needs more than the launch bound's 168.
    let no_setmaxnreg = Genome {
        producer_regs: ProducerRegs::None,
        ..columns()
    };
    let v = no_setmaxnreg.violations(d, Target::Sm90);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].rule == Rule::RegisterFile
            && v[0].detail.contains("176 registers")
            && v[0]
                .detail
                .contains("dkv_split = \"columns\": half the columns")
            && v[0].detail.contains("exceed the 168")
            && v[0].fix.contains("set producer_regs"),
        "{}",
        v[0]
    );
    // Every valid D256 kernel is split by columns with two warpgroups, 64-row steps and
    // setmaxnreg; the shared memory leaves two stages with red adds, one otherwise.
    let base = Genome {
        family: Family::HopperBwd,
        ..Genome::baseline()
    };
    let valid: Vec<Genome> = space::product(base, &space::structural_in(Family::HopperBwd))
        .filter(|g| g.is_valid(d, Target::Sm90))
        .collect();
    let mut combos: Vec<(u32, u32, DqMode)> = valid
        .iter()
        .map(|g| {
            assert_eq!(g.dkv_split, DkvSplit::Columns);
            assert_eq!(g.consumer_wgs, ConsumerWgs::C2);
            assert_ne!(g.producer_regs, ProducerRegs::None);
            assert_ne!(g.exp, ExpFn::Exp2Fma);
            (g.block_m.get(), g.stages.get(), g.dq_mode)
        })
        .collect();
    combos.sort();
    combos.dedup();
    assert_eq!(
        combos,
        [
            (64, 1, DqMode::Atomic),
            (64, 1, DqMode::Separate),
            (64, 1, DqMode::TmaReduce),
            (64, 2, DqMode::Atomic),
        ]
    );
    // x 3 producer register counts x 2 exponentials.
    assert_eq!(valid.len(), 24);
    assert_eq!(
        space::count_valid_in(Family::HopperBwd, d, Target::Sm90),
        24
    );
    // 128-row steps fit the registers split by columns (216 of 232) but not the shared
    // memory.
    let bm128 = Genome {
        block_m: Tile::T128,
        stages: Stages::S1,
        ..columns()
    };
    assert_eq!(failed(&bm128, d), [Rule::SharedMemory]);
    let v = &bm128.violations(d, Target::Sm90)[0];
    assert!(v.detail.contains("dSᵀ and Pᵀ 65536"), "{v}");
    // Over the shared memory split by keys, the message names dSᵀ alone.
    let big = Genome {
        consumer_wgs: ConsumerWgs::C3,
        block_m: Tile::T128,
        stages: Stages::S4,
        ..fa3_bwd()
    };
    let v = big.violations(HeadDim::D64, Target::Sm90);
    let smem = v.iter().find(|v| v.rule == Rule::SharedMemory).unwrap();
    assert!(
        smem.detail.contains("dSᵀ ") && !smem.detail.contains("Pᵀ"),
        "{smem}"
    );
}

#[test]
fn the_fa3_bwd_d256_file_is_the_split_that_fits_with_the_bulk_adds() {
    let file =
        GenomeFile::load(&repo("genomes/fa3-bwd-d256.toml")).unwrap_or_else(|e| panic!("{e}"));
    let g = file.genes;
    assert_eq!(
        g,
        Genome {
            dkv_split: DkvSplit::Columns,
            block_m: Tile::T64,
            stages: Stages::S1,
            dq_mode: DqMode::TmaReduce,
            ..fa3_bwd()
        }
    );
    assert!(g.violations(HeadDim::D256, Target::Sm90).is_empty());
    assert_eq!(g.smem(HeadDim::D256).total(), 231_168);
    // One more stage does not fit with the bulk adds' staging.
    let two = Genome {
        stages: Stages::S2,
        ..g
    };
    assert_eq!(failed(&two, HeadDim::D256), [Rule::SharedMemory]);
    assert_eq!(
        g.summary(),
        "hopper_bwd 64x64 wg2 s1 exp2 dq:tma_reduce regs:32 split:columns"
    );
}
