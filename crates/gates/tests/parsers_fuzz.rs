//! Every parser of what a user writes, fed thousands of inputs mutated from the
//! repository's own files: genome TOML, problem specs, GREEN suite files, dispatch tables
//! and snapshot files. None may panic, and every error must be non-empty and name its
//! input (the file, or the spec), so a user can tell which of their inputs is wrong.
//!
//! Deterministic: one ChaCha seed, so a failure names an input that reproduces. Each
//! mutation is one a person or a tool makes: a character changed, a file cut short, a
//! line doubled or lost, a number too large, a string emptied, text in another script.

use evo_gates::suite::load_suite;
use evo_gates::{GreenSuite, TimingSuite};
use evo_genome::dispatch::DispatchTable;
use evo_genome::{Dtype, GenomeFile, Problem};
use evo_runtime::snapshot::Snapshot;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Values that break parsers: bounds, signs, floats where integers go, empties,
/// other scripts, a right-to-left override, a NUL.
const NASTY: &[&str] = &[
    "4294967296",
    "2147483648",
    "18446744073709551616",
    "99999999999999999999999999",
    "-1",
    "0",
    "1e308",
    "nan",
    "inf",
    "",
    "\"\"",
    "é",
    "𝔘𝔫𝔦",
    "\u{202e}",
    "\0",
    "=",
    ",",
    "[",
    "[[class]]",
    "[genes]",
    "\"",
    "'",
    ":",
    "{}",
    "null",
];

/// Applies one to three mutations to `text`, at character boundaries.
fn mutate(rng: &mut ChaCha8Rng, text: &str) -> String {
    let mut out = text.to_string();
    for _ in 0..rng.random_range(1..=3) {
        out = mutate_once(rng, &out);
    }
    out
}

fn mutate_once(rng: &mut ChaCha8Rng, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<&str> = text.lines().collect();
    let at = |rng: &mut ChaCha8Rng, n: usize| if n == 0 { 0 } else { rng.random_range(0..n) };
    let nasty = |rng: &mut ChaCha8Rng| NASTY[rng.random_range(0..NASTY.len())];
    match rng.random_range(0..8) {
        // A character changed.
        0 => {
            let i = at(rng, chars.len());
            let mut c = chars.clone();
            if !c.is_empty() {
                c[i] = char::from_u32(rng.random_range(0x20..0x7f)).unwrap();
            }
            c.into_iter().collect()
        }
        // Cut short.
        1 => chars[..at(rng, chars.len() + 1)].iter().collect(),
        // A line doubled.
        2 if !lines.is_empty() => {
            let i = at(rng, lines.len());
            lines.insert(i, lines[i]);
            lines.join("\n")
        }
        // A line lost.
        3 if !lines.is_empty() => {
            lines.remove(at(rng, lines.len()));
            lines.join("\n")
        }
        // A run of digits replaced by a value that breaks parsers.
        4 => {
            let digits: Vec<usize> = (0..chars.len())
                .filter(|&i| {
                    chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_ascii_digit())
                })
                .collect();
            if digits.is_empty() {
                return format!("{text}{}", nasty(rng));
            }
            let start = digits[at(rng, digits.len())];
            let end = (start..chars.len())
                .find(|&i| !chars[i].is_ascii_digit())
                .unwrap_or(chars.len());
            let mut s: String = chars[..start].iter().collect();
            s.push_str(nasty(rng));
            s.extend(&chars[end..]);
            s
        }
        // A quoted string emptied or replaced.
        5 => {
            let quotes: Vec<usize> = (0..chars.len()).filter(|&i| chars[i] == '"').collect();
            if quotes.len() < 2 {
                return format!("{}{text}", nasty(rng));
            }
            let q = at(rng, quotes.len() - 1);
            let (a, b) = (quotes[q], quotes[q + 1]);
            let mut s: String = chars[..=a].iter().collect();
            s.push_str(nasty(rng));
            s.extend(&chars[b..]);
            s
        }
        // Something inserted anywhere.
        6 => {
            let i = at(rng, chars.len() + 1);
            let mut s: String = chars[..i].iter().collect();
            s.push_str(nasty(rng));
            s.extend(&chars[i..]);
            s
        }
        // Two lines swapped, or the whole text emptied.
        _ => {
            if lines.len() < 2 {
                return String::new();
            }
            let (i, j) = (at(rng, lines.len()), at(rng, lines.len()));
            lines.swap(i, j);
            lines.join("\n")
        }
    }
}

/// Runs `parse` on `input`; a panic fails the test with the input, and an error must be
/// non-empty and contain `name`.
fn no_panic<T, E: std::fmt::Display>(
    what: &str,
    input: &str,
    name: &str,
    parse: impl FnOnce() -> Result<T, E>,
) -> bool {
    match catch_unwind(AssertUnwindSafe(parse)) {
        Err(_) => panic!("{what} panicked on {input:?}"),
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            let msg = e.to_string();
            assert!(!msg.trim().is_empty(), "{what}: empty error for {input:?}");
            assert!(
                msg.contains(name),
                "{what}: the error does not name {name:?}: {msg}\ninput: {input:?}"
            );
            false
        }
    }
}

/// Mutations of `seeds`, `n` in all, each written to `path` and read back by `parse`;
/// an error must contain `name`. Returns how many parsed.
fn fuzz_file<T, E: std::fmt::Display>(
    what: &str,
    seeds: &[String],
    n: usize,
    rng: &mut ChaCha8Rng,
    (path, name): (&Path, &str),
    parse: impl Fn(&Path) -> Result<T, E>,
) -> usize {
    let mut parsed = 0;
    for i in 0..n {
        let input = mutate(rng, &seeds[i % seeds.len()]);
        std::fs::write(path, &input).unwrap();
        parsed += usize::from(no_panic(what, &input, name, || parse(path)));
    }
    // Bytes that are no UTF-8 at all: a file from another tool or a broken disk.
    let mut bytes = seeds[0].clone().into_bytes();
    bytes.insert(bytes.len() / 2, 0xff);
    std::fs::write(path, &bytes).unwrap();
    no_panic(what, "<invalid UTF-8>", name, || parse(path));
    parsed
}

#[test]
fn no_parser_panics_and_every_error_names_its_input() {
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    let dir = tempfile::tempdir().unwrap();

    // Genome files: every named genome and champion.
    let mut genomes = Vec::new();
    for folder in ["genomes", "genomes/champions/h100"] {
        for entry in std::fs::read_dir(repo().join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".toml") && name != "dispatch.toml" {
                genomes.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let label = Path::new("fuzz/genome.toml");
    let mut parsed = 0;
    for i in 0..3000 {
        let input = mutate(&mut rng, &genomes[i % genomes.len()]);
        parsed += usize::from(no_panic("genome TOML", &input, "fuzz/genome.toml", || {
            GenomeFile::from_toml_str(&input, label)
        }));
    }
    assert!(
        parsed > 0,
        "no mutated genome parsed: the mutations are all fatal"
    );

    // Problem specs: the built-in suites' and the dispatch table's.
    let mut specs: Vec<String> = GreenSuite::Default
        .cases()
        .iter()
        .map(|c| c.problem.spec())
        .collect();
    for suite in [TimingSuite::Seed, TimingSuite::Anchors] {
        specs.extend(suite.problems(Dtype::Bf16).iter().map(Problem::spec));
    }
    let table = read("genomes/champions/h100/dispatch.toml");
    specs.extend(
        table
            .lines()
            .filter_map(|l| l.strip_prefix("shape = \""))
            .map(|s| s.trim_end_matches('"').to_string()),
    );
    // A spec that parses prints back as one that parses to the same problem, and the
    // committed table chooses a champion for it (or says why not) without a panic.
    let committed = repo().join("genomes/champions/h100/dispatch.toml");
    let chooser = DispatchTable::load(&committed).ok();
    let committed_name = committed.display().to_string();
    let mut parsed = 0;
    for i in 0..6000 {
        let input = mutate(&mut rng, &specs[i % specs.len()]);
        let mut problem = None;
        parsed += usize::from(no_panic(
            "problem spec",
            &input,
            &format!("`{input}`"),
            || input.parse::<Problem>().map(|p| problem = Some(p)),
        ));
        if let Some(p) = problem {
            assert_eq!(p.spec().parse::<Problem>(), Ok(p), "{input:?}");
            if let Some(table) = &chooser {
                no_panic("dispatch choice", &input, &committed_name, || {
                    table.choose(&p, &committed).map(|_| ())
                });
            }
        }
    }
    assert!(parsed > 0, "no mutated spec parsed");

    // GREEN suite files.
    let suite = read("tests/sanitize/suite.toml");
    let suite_path = dir.path().join("suite.toml");
    let parsed = fuzz_file(
        "suite file",
        &[suite],
        1000,
        &mut rng,
        (&suite_path, &suite_path.display().to_string()),
        load_suite,
    );
    assert!(parsed > 0, "no mutated suite parsed");

    // Dispatch tables, and the champions they name (copied beside the table).
    let champions = repo().join("genomes/champions/h100");
    for entry in std::fs::read_dir(&champions).unwrap() {
        let path = entry.unwrap().path();
        // The files beside the table (its backward genomes sit in a folder of their own).
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    // An error names the table, or the champion file in its folder that it points at.
    let table_path = dir.path().join("dispatch.toml");
    let folder = dir.path().display().to_string();
    let parsed = fuzz_file(
        "dispatch table",
        &[table],
        1000,
        &mut rng,
        (&table_path, &folder),
        |p| DispatchTable::load(p).and_then(|t| t.load_champions(dir.path(), p)),
    );
    assert!(parsed > 0, "no mutated table parsed");

    // Snapshot files.
    let snapshot = snapshot().to_json();
    let snapshot_path = dir.path().join("snapshot.json");
    let parsed = fuzz_file(
        "snapshot",
        &[snapshot],
        1000,
        &mut rng,
        (&snapshot_path, &snapshot_path.display().to_string()),
        Snapshot::read,
    );
    assert!(parsed > 0, "no mutated snapshot parsed");
}

/// A snapshot as `evo snapshot --record` writes one (no committed file holds one).
fn snapshot() -> Snapshot {
    Snapshot::example(
        "1,2,40,40,64,bf16,causal=br,kv=1",
        "b1-h2kv1-l40-d64-causal-br",
    )
}
