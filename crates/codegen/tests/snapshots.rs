//! Snapshots per named genome (`genomes/*.toml`): the macro definitions at every head
//! dimension, and the ptxas resource report on sm_89 and sm_90. A template or
//! NVRTC change that moves a register count shows up in review
//! (`cargo insta review`), never silently. Needs NVRTC 13.5.37 (pinned by `.ci/run`):
//! other releases allocate registers differently.

use evo_codegen::*;
use evo_genome::{Dtype, GenomeFile, HeadDim, Target};
use std::fmt::Write;

fn load(path: &std::path::Path) -> GenomeFile {
    GenomeFile::load(path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn defines_of_named_genomes() {
    insta::glob!("../../../genomes", "*.toml", |path| {
        let file = load(path);
        let mut text = String::new();
        for d in HeadDim::ALL {
            writeln!(text, "# D{d} f16").unwrap();
            text.push_str(&defines(&file.genes, d, Dtype::F16).to_string());
        }
        insta::with_settings!({ description => file.genes.summary() }, {
            insta::assert_snapshot!(text);
        });
    });
}

#[test]
fn ptxas_report_of_named_genomes() {
    let tc = Toolchain::discover().unwrap_or_else(|e| panic!("{e}"));
    insta::glob!("../../../genomes", "*.toml", |path| {
        let file = load(path);
        let mut text = String::new();
        for target in Target::ALL {
            let violations = file.genes.violations(HeadDim::D64, target);
            if !violations.is_empty() {
                let rules: Vec<String> = violations.iter().map(|v| v.rule.to_string()).collect();
                writeln!(text, "# {target} D64 f16: not valid ({})", rules.join(", ")).unwrap();
                continue;
            }
            let c = compile_genome(&tc, &file.genes, HeadDim::D64, Dtype::F16, target)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            writeln!(text, "# {target} D64 f16").unwrap();
            write!(text, "{}", c.report).unwrap();
        }
        insta::with_settings!({ description => file.genes.summary() }, {
            insta::assert_snapshot!(text);
        });
    });
}
