//! A genome file states every gene of its family and no gene of the other; the records
//! of older builds, read through the lenient serde form, still load.

use evo_genome::{Family, Gene, Genome, GenomeFile};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load(name: &str) -> GenomeFile {
    GenomeFile::load(&repo().join(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn text(name: &str) -> String {
    std::fs::read_to_string(repo().join(name)).unwrap()
}

fn error(text: &str) -> String {
    GenomeFile::from_toml_str(text, Path::new("g.toml"))
        .unwrap_err()
        .to_string()
}

#[test]
fn a_gene_left_out_is_refused_in_either_family_naming_the_gene_and_its_alleles() {
    let hopper = text("genomes/fa3.toml").replace("pingpong = \"on\"\n", "");
    let msg = error(&hopper);
    assert!(msg.starts_with("g.toml:"), "{msg}");
    assert!(
        msg.contains("gene `pingpong` is missing")
            && msg.contains("a hopper genome states every gene of its family")
            && msg.contains("pingpong = one of \"off\", \"on\""),
        "{msg}"
    );
    let ampere = text("genomes/fa2.toml").replace("pack_gqa = \"off\"\n", "");
    let msg = error(&ampere);
    assert!(
        msg.contains("gene `pack_gqa` is missing")
            && msg.contains("an ampere genome")
            && msg.contains("pack_gqa = one of \"off\", \"on\""),
        "{msg}"
    );
    // An Ampere gene the typed reader finds missing gets the same words.
    let msg = error(&text("genomes/fa2.toml").replace("warps = 4\n", ""));
    assert!(
        msg.contains("gene `warps` is missing") && msg.contains("warps = one of 1, 2, 4, 8"),
        "{msg}"
    );
}

#[test]
fn a_gene_of_the_other_family_is_refused_naming_the_gene_and_the_family() {
    let hopper = text("genomes/fa3.toml").replace("[genes]\n", "[genes]\nqk_math = \"mma\"\n");
    let msg = error(&hopper);
    let line = hopper
        .lines()
        .position(|l| l.starts_with("qk_math"))
        .unwrap()
        + 1;
    assert!(msg.starts_with(&format!("g.toml:{line}:")), "{msg}");
    assert!(
        msg.contains("gene `qk_math` does not apply to the hopper family")
            && msg.contains("remove the line"),
        "{msg}"
    );
    let ampere = text("genomes/fa2.toml").replace("[genes]\n", "[genes]\npingpong = \"off\"\n");
    let msg = error(&ampere);
    assert!(
        msg.contains("gene `pingpong` does not apply to the ampere family"),
        "{msg}"
    );
    // `family` itself may be stated in an Ampere file, or left out.
    let explicit = text("genomes/fa2.toml").replace("[genes]\n", "[genes]\nfamily = \"ampere\"\n");
    assert_eq!(
        GenomeFile::from_toml_str(&explicit, Path::new("g.toml"))
            .unwrap()
            .genes,
        load("genomes/fa2.toml").genes
    );
}

#[test]
fn files_evo_writes_state_every_gene_of_the_family_and_read_back_strictly() {
    for &family in Family::ALL {
        let genes = Genome {
            family,
            ..Genome::baseline()
        }
        .canonical();
        let file = GenomeFile {
            name: "w".into(),
            description: String::new(),
            genes,
        };
        let written = file.to_toml_string();
        for gene in Gene::ALL {
            let stated = written.contains(&format!("\n{} = ", gene.name()));
            let expected =
                gene.applies(family) && !(gene == Gene::Family && family == Family::Ampere);
            assert_eq!(
                stated,
                expected,
                "{} in a {family} file:\n{written}",
                gene.name()
            );
        }
        let back = GenomeFile::from_toml_str(&written, Path::new("w.toml")).unwrap();
        assert_eq!(back.genes.id(), genes.id());
    }
}

#[test]
fn records_that_leave_default_genes_out_still_load() {
    // The serde form evaluations and lineages record: a Hopper genome with its Ampere
    // genes and without the Hopper genes at their default.
    let fa3 = load("genomes/fa3.toml").genes;
    let record = toml::to_string(&fa3).unwrap();
    assert!(
        !record.contains("persistent") && record.contains("qk_math"),
        "{record}"
    );
    let back: Genome = toml::from_str(&record).unwrap();
    assert_eq!(back.id(), fa3.id());
}

#[test]
fn every_genome_file_in_the_repository_loads() {
    let mut files = Vec::new();
    for dir in ["genomes", "genomes/champions/h100"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".toml") && name != "dispatch.toml" {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 20, "{files:?}");
    for path in files {
        if let Err(e) = GenomeFile::load(&path) {
            panic!("{e}");
        }
    }
}
