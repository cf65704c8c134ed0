//! Bad input through the binary: problem specs that read two ways or exceed what the
//! kernels index, genome files that leave a gene out or state another family's, and
//! options that are named as options, not as lines of a file nobody wrote.

use crate::util::{evo, repo_root, stderr};
use std::path::Path;

/// `evo dispatch SPEC` on the committed champions: the spec's error, exit 2.
fn dispatch_error(spec: &str) -> String {
    let out = evo(&["dispatch", spec], &[]);
    assert_eq!(out.status.code(), Some(2), "{spec}: {}", stderr(&out));
    stderr(&out)
}

#[test]
fn a_spec_that_reads_two_ways_is_refused_naming_the_repeat() {
    for (spec, says) in [
        (
            "1,8,512,512,64,f16,causal,causal",
            "gives the causal mask a second time",
        ),
        (
            "1,8,512,512,64,f16,bf16",
            "a second dtype `bf16` after `f16`",
        ),
        ("1,8,,512,512,64,f16", "field 3 (Lq) is empty"),
        ("1,8,512,512,64,f16,", "option 1 is empty"),
    ] {
        let err = dispatch_error(spec);
        assert!(
            err.contains(&format!("`{spec}`: ")) && err.contains(says),
            "{spec}: {err}"
        );
    }
}

#[test]
fn a_number_too_large_for_the_kernels_is_out_of_range_not_not_a_number() {
    let err = dispatch_error("4294967296,8,512,512,64,f16");
    assert!(
        err.contains("B 4294967296 is out of range: it must be 1 to 2147483647"),
        "{err}"
    );
    assert!(!err.contains("not a number"), "{err}");
    let err = dispatch_error("1,8,512,512,64,f16,window=4294967296:");
    assert!(
        err.contains("window left 4294967296 is out of range: it must be 0 to 2147483647"),
        "{err}"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn compile_error(path: &str) -> String {
    let out = evo(&["compile", path], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn a_genome_file_that_leaves_out_a_gene_is_refused_in_either_family() {
    let tmp = tempfile::tempdir().unwrap();
    let fa3 = std::fs::read_to_string(repo_root().join("genomes/fa3.toml")).unwrap();
    let path = write(
        tmp.path(),
        "h.toml",
        &fa3.replace("pingpong = \"on\"\n", ""),
    );
    let err = compile_error(&path);
    assert!(
        err.contains(&path)
            && err.contains("gene `pingpong` is missing")
            && err.contains("pingpong = one of \"off\", \"on\""),
        "{err}"
    );
    let fa2 = std::fs::read_to_string(repo_root().join("genomes/fa2.toml")).unwrap();
    let path = write(
        tmp.path(),
        "a.toml",
        &fa2.replace("pack_gqa = \"off\"\n", ""),
    );
    let err = compile_error(&path);
    assert!(
        err.contains("gene `pack_gqa` is missing") && err.contains("an ampere genome"),
        "{err}"
    );
}

#[test]
fn a_gene_of_another_family_is_refused_naming_gene_and_family() {
    let tmp = tempfile::tempdir().unwrap();
    let fa3 = std::fs::read_to_string(repo_root().join("genomes/fa3.toml")).unwrap();
    let text = fa3.replace("[genes]\n", "[genes]\nwarps = 8\n");
    let path = write(tmp.path(), "h.toml", &text);
    let line = text.lines().position(|l| l == "warps = 8").unwrap() + 1;
    let err = compile_error(&path);
    assert!(
        err.contains(&format!("{path}:{line}:"))
            && err.contains("gene `warps` does not apply to the hopper family"),
        "{err}"
    );
}

#[test]
fn options_of_a_new_search_are_named_as_options_not_as_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp").display().to_string();
    let fixture = repo_root().join("crates/mutator/tests/fixtures/synthetic-landscape");
    let out = evo(
        &[
            "evolve",
            "--experiment",
            &exp,
            "--backend",
            &format!("replay:{}", fixture.display()),
            "--strategy",
            "random",
            "--steady",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--steady: a steady-state search breeds from a population"),
        "{err}"
    );
    assert!(!err.contains("the command line:"), "{err}");
}

#[test]
fn an_unreadable_record_prints_the_os_error_once() {
    // A lineage.json the OS refuses to read as a file: its error is in the message, and
    // `{:#}` would print it again as the cause.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("lineage.json")).unwrap();
    let out = evo(&["lineage", &tmp.path().display().to_string()], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.matches("Is a directory").count(), 1, "{err}");
}
