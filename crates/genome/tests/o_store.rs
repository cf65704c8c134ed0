//! The Hopper `o_store` gene (kernels/attention_sm90_kernel.cuh, `store_o`): the shared
//! memory it frees (direct) or keeps (staged, and TMA, whose copy engine reads the
//! staging), the tiles that then fit, its TOML form and its place in the id.

use evo_genome::rules::{self, HOPPER_ALIGN_SLACK, HOPPER_BARRIERS};
use evo_genome::{
    BlockN, Family, Gene, Genome, GenomeFile, HeadDim, OStore, Overlap, ProducerRegs, Rule, Stages,
    Switch, Target,
};
use std::path::Path;

mod common;
use common::{fa3, failed};

/// FlashAttention-3's D128 tile on a persistent grid: 128 x `block_n`, two stages.
fn persistent(block_n: BlockN, o_store: OStore) -> Genome {
    Genome {
        block_n,
        stages: Stages::S2,
        persistent: Switch::On,
        producer_regs: ProducerRegs::R24,
        o_store,
        ..fa3()
    }
}

#[test]
fn a_direct_store_frees_the_persistent_o_buffer() {
    let d = HeadDim::D128;
    let staged = persistent(BlockN::N128, OStore::Staged);
    let direct = persistent(BlockN::N128, OStore::Direct);
    let q = 128 * 128 * 2;
    assert_eq!(staged.smem(d).q, q);
    assert_eq!(staged.smem(d).o, q);
    assert_eq!(direct.smem(d).o, 0);
    assert_eq!(staged.smem(d).total(), direct.smem(d).total() + q);
    assert!(rules::hopper_second_q_buffer(&staged));
    assert!(!rules::hopper_second_q_buffer(&direct));
    // Chained, the second buffer is the next tile's Q slot: a direct store keeps it.
    let chained = Genome {
        softmax_overlap: Overlap::Chained,
        ..direct
    };
    assert!(rules::hopper_second_q_buffer(&chained));
    assert_eq!(chained.smem(d).o, q);
    // The copy engine stores O from the staging: a persistent CTA keeps its buffer.
    let tma = persistent(BlockN::N128, OStore::Tma);
    assert!(rules::hopper_second_q_buffer(&tma));
    assert_eq!(tma.smem(d).total(), staged.smem(d).total());
    // Without a persistent grid O is staged in Q's rows: no buffer in any way.
    for o_store in OStore::ALL.iter().copied() {
        let one_tile = Genome { o_store, ..fa3() };
        assert_eq!(one_tile.smem(d).o, 0);
        assert_eq!(one_tile.smem(d).stats, HOPPER_ALIGN_SLACK + HOPPER_BARRIERS);
    }
}

#[test]
fn the_wide_d128_tiles_fit_a_persistent_cta_only_with_a_direct_store() {
    // 1024 + Q 32768 + K/V 2 x 2 x N x 256 + 256 against sm_90's 232448 bytes: 144 fits
    // with the O buffer (214272), 176 and 192 only without it (214272, 230656).
    let d = HeadDim::D128;
    assert!(persistent(BlockN::N144, OStore::Staged).is_valid(d, Target::Sm90));
    for n in [BlockN::N176, BlockN::N192] {
        let direct = persistent(n, OStore::Direct);
        assert!(
            direct.is_valid(d, Target::Sm90),
            "{n}: {:?}",
            failed(&direct, d)
        );
        for o_store in [OStore::Staged, OStore::Tma] {
            let staged = persistent(n, o_store);
            assert_eq!(
                failed(&staged, d),
                vec![Rule::SharedMemory],
                "{n} {o_store}"
            );
            let v = &staged.violations(d, Target::Sm90)[0];
            assert!(v.fix.contains("o_store = \"direct\""), "{v}");
        }
        // Without a persistent grid the copy engine's store fits: O is staged in Q's rows.
        let one_tile = Genome {
            persistent: Switch::Off,
            ..persistent(n, OStore::Tma)
        };
        assert!(one_tile.is_valid(d, Target::Sm90), "{n}");
    }
    assert_eq!(
        persistent(BlockN::N192, OStore::Direct).smem(d).total(),
        230_656
    );
    // Where a direct store is already taken, the fix does not offer it again.
    let too_wide = persistent(BlockN::N208, OStore::Direct);
    assert_eq!(failed(&too_wide, d), vec![Rule::SharedMemory]);
    let v = &too_wide.violations(d, Target::Sm90)[0];
    assert!(!v.fix.contains("o_store"), "{v}");
    // Chained, the buffer is the next tile's Q slot, which a direct store keeps: the fix
    // does not offer it either.
    let chained = Genome {
        softmax_overlap: Overlap::Chained,
        ..persistent(BlockN::N208, OStore::Staged)
    };
    let v = &chained.violations(d, Target::Sm90)[0];
    assert_eq!(v.rule, Rule::SharedMemory);
    assert!(!v.fix.contains("o_store"), "{v}");
}

#[test]
fn the_gene_is_hopper_s_and_reads_and_writes_as_toml() {
    assert!(Gene::OStore.applies(Family::Hopper));
    assert!(!Gene::OStore.applies(Family::Ampere));
    assert_eq!(
        Gene::OStore.allele_labels(),
        vec!["staged", "direct", "tma"]
    );
    let g = persistent(BlockN::N192, OStore::Direct);
    let written = GenomeFile {
        name: "d".into(),
        description: String::new(),
        genes: g,
    }
    .to_toml_string();
    assert!(written.contains("o_store = \"direct\""), "{written}");
    let file = GenomeFile::from_toml_str(&written, Path::new("d.toml")).unwrap();
    assert_eq!(file.genes, g);
    assert!(
        file.genes.summary().ends_with(" o:direct"),
        "{}",
        file.genes.summary()
    );
    // Staged is what every genome written before the gene implies: not in the id, not
    // in the summary; a file states it like every gene.
    let staged = Genome {
        o_store: OStore::Staged,
        ..g
    };
    assert!(GenomeFile {
        genes: staged,
        ..file.clone()
    }
    .to_toml_string()
    .contains("o_store = \"staged\""));
    assert!(!staged.summary().contains("o:"));
    assert_ne!(g.id(), staged.id());
    // The copy engine's store: in the TOML, the summary and the id.
    let tma = Genome {
        o_store: OStore::Tma,
        ..g
    };
    let tma_file = GenomeFile {
        genes: tma,
        ..file.clone()
    };
    let tma_toml = tma_file.to_toml_string();
    assert!(tma_toml.contains("o_store = \"tma\""), "{tma_toml}");
    assert_eq!(
        GenomeFile::from_toml_str(&tma_toml, Path::new("t.toml"))
            .unwrap()
            .genes,
        tma
    );
    assert!(tma.summary().ends_with(" o:tma"), "{}", tma.summary());
    assert!(tma.id() != g.id() && tma.id() != staged.id());
    // A misspelt allele is an error that names the field's alleles.
    let bad = written.replace("\"direct\"", "\"bulk\"");
    let err = GenomeFile::from_toml_str(&bad, Path::new("d.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("d.toml") && err.contains("staged"), "{err}");
}
