//! The Hopper `cluster_combine` gene (kernels/cluster.cuh): its rules, its shared memory,
//! its TOML form and its place in the genome id.

use evo_genome::rules::{self, HOPPER_ALIGN_SLACK, HOPPER_BARRIERS};
use evo_genome::{
    ConsumerWgs, Family, Gene, Genome, GenomeFile, HeadDim, Overlap, Rule, SplitKv, Switch, Target,
};
use std::path::Path;

mod common;
use common::{fa3, failed};

fn cluster(split: SplitKv) -> Genome {
    Genome {
        split_kv: split,
        cluster_combine: Switch::On,
        ..fa3()
    }
}

#[test]
fn a_cluster_merges_two_to_eight_splits() {
    for split in [SplitKv::K2, SplitKv::K4, SplitKv::K8] {
        assert!(
            cluster(split).is_valid(HeadDim::D64, Target::Sm90),
            "{split}: {:?}",
            failed(&cluster(split), HeadDim::D64)
        );
    }
    for split in [SplitKv::K1, SplitKv::K16, SplitKv::K32] {
        assert_eq!(
            failed(&cluster(split), HeadDim::D64),
            vec![Rule::ClusterCombineSplits],
            "{split}"
        );
        let v = &cluster(split).violations(HeadDim::D64, Target::Sm90)[0];
        assert!(v.detail.contains(&format!("split_kv = {split}")), "{v}");
        assert!(v.fix.contains("split_kv = 2, 4 or 8"), "{v}");
    }
}

#[test]
fn a_chain_has_no_cluster_merge() {
    let persistent = Genome {
        persistent: Switch::On,
        ..cluster(SplitKv::K2)
    };
    assert!(persistent.is_valid(HeadDim::D64, Target::Sm90));
    let chained = Genome {
        softmax_overlap: Overlap::Chained,
        ..persistent
    };
    assert_eq!(
        failed(&chained, HeadDim::D64),
        vec![Rule::ClusterCombineNotChained]
    );
    assert!(Rule::ClusterCombineNotChained.why().contains("chained"));
}

#[test]
fn the_exchange_holds_each_other_split_s_slice_and_statistics() {
    // D64, 2 splits, 2 consumer warpgroups: each CTA finalises 4 of the 8 column groups
    // and receives them, plus one float4 of statistics, per thread, from the other CTA.
    let g = cluster(SplitKv::K2);
    assert_eq!(g.consumer_wgs, ConsumerWgs::C2);
    assert_eq!(
        rules::cluster_exchange_bytes(&g, HeadDim::D64),
        2 * (4 + 1) * 16 * 128
    );
    // D128 over 8 splits: 2 groups each, from 7 other CTAs.
    assert_eq!(
        rules::cluster_exchange_bytes(&cluster(SplitKv::K8), HeadDim::D128),
        2 * 7 * (2 + 1) * 16 * 128
    );
    // D96 (12 groups) over 8 splits: ceil(12 / 8) = 2 slots a source, the last ranks
    // receive fewer groups than they have room for.
    assert_eq!(
        rules::cluster_exchange_bytes(&cluster(SplitKv::K8), HeadDim::D96),
        2 * 7 * (2 + 1) * 16 * 128
    );
    // A persistent CTA alternates two exchanges.
    let persistent = Genome {
        persistent: Switch::On,
        ..g
    };
    assert_eq!(
        rules::cluster_exchange_bytes(&persistent, HeadDim::D64),
        2 * 2 * (4 + 1) * 16 * 128
    );
    let plan = g.smem(HeadDim::D64);
    let without = fa3().smem(HeadDim::D64);
    assert_eq!(plan.total(), without.total() + plan.exchange);
    assert_eq!(plan.stats, HOPPER_ALIGN_SLACK + HOPPER_BARRIERS);
    assert_eq!(rules::cluster_exchange_bytes(&fa3(), HeadDim::D64), 0);
}

#[test]
fn an_exchange_that_does_not_fit_is_named_in_the_shared_memory_rule() {
    // D256, 8 splits, two warpgroups: 2 * 7 * 5 * 2048 bytes of exchange on top of the tiles.
    let g = cluster(SplitKv::K8);
    let v = g.violations(HeadDim::D256, Target::Sm90);
    let smem = v
        .iter()
        .find(|v| v.rule == Rule::SharedMemory)
        .unwrap_or_else(|| panic!("{v:?}"));
    assert!(smem.detail.contains("cluster exchange 143360"), "{smem}");
    assert!(smem.fix.contains("cluster_combine"), "{smem}");
}

#[test]
fn the_gene_is_hopper_s_and_reads_and_writes_as_toml() {
    assert!(Gene::ClusterCombine.applies(Family::Hopper));
    assert!(!Gene::ClusterCombine.applies(Family::Ampere));
    assert_eq!(Gene::ClusterCombine.allele_labels(), vec!["off", "on"]);
    let written = GenomeFile {
        name: "c".into(),
        description: String::new(),
        genes: cluster(SplitKv::K4),
    }
    .to_toml_string();
    assert!(written.contains("cluster_combine = \"on\""), "{written}");
    let file = GenomeFile::from_toml_str(&written, Path::new("c.toml")).unwrap();
    assert_eq!(file.genes.cluster_combine, Switch::On);
    assert!(file.genes.summary().contains("split4+cluster"));
    // Off is the value every genome written before the gene implies: not in the id; a
    // file states it all the same (a genome file states every gene of its family).
    assert!(GenomeFile {
        genes: fa3(),
        ..file.clone()
    }
    .to_toml_string()
    .contains("cluster_combine = \"off\""));
    assert_ne!(
        file.genes.id(),
        Genome {
            cluster_combine: Switch::Off,
            ..file.genes
        }
        .id()
    );
}
