//! The Hopper `wg_split` gene (kernels/attention_sm90_kernel.cuh, the consumers): split by
//! keys, every consumer warpgroup computes the block's 64 rows over its own K/V tiles and
//! the warpgroups merge in shared memory. Its rules, its shared memory, its rows per CTA,
//! its TOML form and its place in the id.

use evo_genome::rules::{self, HOPPER_ALIGN_SLACK, HOPPER_BARRIERS};
use evo_genome::{
    BlockN, ConsumerWgs, Family, Gene, Genome, GenomeFile, HeadDim, Overlap, Rule, Stages, Switch,
    Target, WgSplit,
};
use std::path::Path;

mod common;
use common::{fa3, failed};

/// FlashAttention-3's genome with its two consumer warpgroups split by keys.
fn keys() -> Genome {
    Genome {
        wg_split: WgSplit::Keys,
        ..fa3()
    }
}

#[test]
fn split_by_keys_a_cta_has_64_rows_and_a_merge_area() {
    let rows = fa3();
    let k = keys();
    assert_eq!(rows.consumer_wgs, ConsumerWgs::C2);
    assert_eq!(rows.rows_per_cta(), 128);
    assert_eq!(k.rows_per_cta(), 64);
    for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128, HeadDim::D256] {
        let ds = rules::hopper_stored_columns(d);
        let (pr, pk) = (rows.smem(d), k.smem(d));
        // Q holds 64 rows; warpgroup 1 leaves its O (ds / 2 floats a thread), m and l.
        assert_eq!(pk.q, 64 * ds * 2, "{d}");
        assert_eq!(pk.keys, (ds / 2 + 4) * 128 * 4, "{d}");
        assert_eq!(pk.keys, rules::keys_merge_bytes(&k, d));
        assert_eq!(pr.keys, 0);
        assert_eq!(pk.kv, pr.kv);
        assert_eq!(pk.stats, HOPPER_ALIGN_SLACK + HOPPER_BARRIERS);
        assert_eq!(pk.total(), pr.total() - pr.q + pk.q + pk.keys, "{d}");
    }
    // Three warpgroups: two leave their state.
    let three = Genome {
        consumer_wgs: ConsumerWgs::C3,
        stages: Stages::S3,
        ..keys()
    };
    assert_eq!(three.smem(HeadDim::D128).keys, 2 * (64 + 4) * 128 * 4);
    assert_eq!(three.rows_per_cta(), 64);
}

#[test]
fn split_by_keys_needs_warpgroups_that_own_their_stages() {
    let d = HeadDim::D128;
    assert!(keys().is_valid(d, Target::Sm90), "{:?}", failed(&keys(), d));
    // One consumer warpgroup: nothing to split.
    let one = Genome {
        consumer_wgs: ConsumerWgs::C1,
        pingpong: Switch::Off,
        ..keys()
    };
    assert_eq!(failed(&one, d), vec![Rule::WgKeysNeedsTwoWarpgroups]);
    let v = &one.violations(d, Target::Sm90)[0];
    assert!(v.fix.contains("consumer_wgs = 2 or 3"), "{v}");
    // Each stage must belong to one warpgroup: stages a multiple of the warpgroups.
    for (wgs, stages, ok) in [
        (ConsumerWgs::C2, Stages::S2, true),
        (ConsumerWgs::C2, Stages::S4, true),
        (ConsumerWgs::C2, Stages::S3, false),
        (ConsumerWgs::C2, Stages::S1, false),
        (ConsumerWgs::C3, Stages::S3, true),
        (ConsumerWgs::C3, Stages::S2, false),
        (ConsumerWgs::C3, Stages::S4, false),
    ] {
        let g = Genome {
            consumer_wgs: wgs,
            stages,
            block_n: BlockN::N64,
            ..keys()
        };
        let f = failed(&g, d);
        assert_eq!(f.is_empty(), ok, "{wgs} warpgroups, {stages} stages: {f:?}");
        if !ok {
            assert_eq!(f, vec![Rule::WgKeysStages]);
            let v = &g.violations(d, Target::Sm90)[0];
            assert!(v.fix.contains(&format!("multiple of {wgs}")), "{v}");
        }
        // The same genome split by rows has no such rule.
        let by_rows = Genome {
            wg_split: WgSplit::Rows,
            ..g
        };
        assert!(!failed(&by_rows, d).contains(&Rule::WgKeysStages));
    }
    // The chained stream has no merge; ping-pong (fa3's, on: the template pads a
    // warpgroup's turns), persistent grids and the cluster merge do.
    let chained = Genome {
        softmax_overlap: Overlap::Chained,
        persistent: Switch::On,
        ..keys()
    };
    assert_eq!(failed(&chained, d), vec![Rule::WgKeysNotChained]);
    for g in [
        Genome {
            pingpong: Switch::Off,
            ..keys()
        },
        Genome {
            persistent: Switch::On,
            softmax_overlap: Overlap::On,
            ..keys()
        },
        Genome {
            split_kv: evo_genome::SplitKv::K2,
            cluster_combine: Switch::On,
            ..keys()
        },
    ] {
        assert!(
            g.is_valid(d, Target::Sm90),
            "{}: {:?}",
            g.summary(),
            failed(&g, d)
        );
    }
    // Over the shared memory, the message counts the merge area.
    let wide = Genome {
        block_n: BlockN::N128,
        stages: Stages::S2,
        ..keys()
    };
    let v = wide.violations(HeadDim::D256, Target::Sm90);
    assert!(
        v.iter().any(|v| v.rule == Rule::SharedMemory
            && v.detail.contains("warpgroup merge")
            && v.fix.contains("wg_split = \"rows\"")),
        "{v:?}"
    );
}

#[test]
fn the_gene_is_hopper_s_and_reads_and_writes_as_toml() {
    assert!(Gene::WgSplit.applies(Family::Hopper));
    assert!(!Gene::WgSplit.applies(Family::Ampere));
    assert_eq!(Gene::WgSplit.allele_labels(), vec!["rows", "keys"]);
    let g = keys();
    let written = GenomeFile {
        name: "k".into(),
        description: String::new(),
        genes: g,
    }
    .to_toml_string();
    assert!(written.contains("wg_split = \"keys\""), "{written}");
    let file = GenomeFile::from_toml_str(&written, Path::new("k.toml")).unwrap();
    assert_eq!(file.genes, g);
    assert!(
        file.genes.summary().contains(" wg2:keys "),
        "{}",
        g.summary()
    );
    // Rows is what every genome written before the gene implies: not in the summary or
    // the id (fa3's recorded id stays its id); a file states it like every gene.
    let rows = fa3();
    assert!(GenomeFile {
        genes: rows,
        ..file.clone()
    }
    .to_toml_string()
    .contains("wg_split = \"rows\""));
    assert!(!rows.summary().contains("keys"));
    assert_ne!(g.id(), rows.id());
    // A misspelt allele is an error that names the field's alleles.
    let bad = written.replace("\"keys\"", "\"cols\"");
    let err = GenomeFile::from_toml_str(&bad, Path::new("k.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("k.toml") && err.contains("rows"), "{err}");
}
