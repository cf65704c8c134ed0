//! Snapshots of a recorded champion (CPU): the genome the H100 search crowned, the
//! defines it compiles with, and its evolution path, read from the committed experiment.
//! A change to the lineage format, the renderer or the codegen shows up here in review.

use crate::util::repo_root;
use evo_genome::{Dtype, GenomeFile, HeadDim};
use evo_lineage::{path_table, Lineage};

const EXPERIMENT: &str = "experiments/2026-11-22-h100-evolve";

fn lineage() -> Lineage {
    Lineage::load(&repo_root().join(EXPERIMENT).join("lineage.json")).expect("recorded lineage")
}

#[test]
fn champion_genome_of_the_recorded_h100_search() {
    let lineage = lineage();
    let champion = lineage.champion().expect("the search crowned a champion");
    let file = GenomeFile {
        name: champion.id.to_string(),
        description: String::new(),
        genes: champion.genome,
    };
    insta::assert_snapshot!(file.to_toml_string());
    // The committed genome file is that champion, gene for gene.
    let named = GenomeFile::load(&repo_root().join("genomes/champion-h100-seed.toml")).unwrap();
    assert_eq!(named.genes, champion.genome);
    assert_eq!(named.genes.id(), champion.id);
}

#[test]
fn champion_defines_of_the_recorded_h100_search() {
    let champion = lineage().champion().expect("champion").genome;
    insta::assert_snapshot!(evo_codegen::defines(&champion, HeadDim::D64, Dtype::F16).to_string());
}

#[test]
fn champion_lineage_table_of_the_recorded_h100_search() {
    let lineage = lineage();
    let path = lineage.champion_path();
    insta::assert_snapshot!(path_table(&lineage, &path));
}
