//! The README against the repository and the binary.
//!
//! A figure in the README is only worth something while the command named beside it still
//! gives it. The replay figures are the ones a CPU can reproduce, so these tests run the
//! commands the README names and compare their output with the README's own text (parsed,
//! not copied here), and check that every file and folder the README points to exists:
//! neither can drift from the README silently.

use crate::util::{evo, repo_root, stderr, stdout};
use std::collections::BTreeMap;

fn readme() -> String {
    std::fs::read_to_string(repo_root().join("README.md")).expect("README.md is readable")
}

/// The folders whose paths the README names and a reader would open.
const PATH_ROOTS: &[&str] = &[
    "experiments/",
    "genomes/",
    "scripts/",
    "kernels/",
    "crates/",
    "tests/",
    "examples/",
];

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./*<>+-".contains(c)
}

/// Every path in `text` that starts with one of [`PATH_ROOTS`], trailing punctuation removed.
fn named_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (start, _) in text.char_indices() {
        let rest = &text[start..];
        if !PATH_ROOTS.iter().any(|root| rest.starts_with(root)) {
            continue;
        }
        // Only where a path begins: `tests/` inside `crates/runtime/tests/` is not one.
        if text[..start].chars().next_back().is_some_and(is_path_char) {
            continue;
        }
        let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
        paths.push(rest[..end].trim_end_matches(['.', ',']).to_string());
    }
    paths
}

/// A path the reader chooses (`experiments/my-search`, `experiments/<search>`) or one a
/// build writes (`.../target/release/...`) is not expected in a checkout.
fn is_placeholder_or_output(path: &str) -> bool {
    path.contains('<')
        || path
            .split('/')
            .any(|part| part.starts_with("my-") || part.starts_with("my_") || part == "target")
}

/// The paths `file` names that are not in the repository; panics when it names fewer than
/// `at_least`, which would mean the parse broke.
fn missing_paths(file: &str, at_least: usize) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join(file))
        .unwrap_or_else(|e| panic!("{file} is readable: {e}"));
    let paths = named_paths(&text);
    assert!(
        paths.len() >= at_least,
        "found only {} paths in {file}: {paths:?}",
        paths.len()
    );
    paths
        .into_iter()
        .filter(|p| !is_placeholder_or_output(p))
        .filter(|p| {
            // A glob names files under the folder before its first `*`.
            let fixed = p.split('*').next().unwrap_or(p);
            !repo_root().join(fixed).exists()
        })
        .collect()
}

#[test]
fn every_path_the_readme_names_exists() {
    let missing = missing_paths("README.md", 40);
    assert!(
        missing.is_empty(),
        "README.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_path_the_history_names_exists() {
    let missing = missing_paths("HISTORY.md", 20);
    assert!(
        missing.is_empty(),
        "HISTORY.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_path_parser_finds_paths_and_skips_placeholders() {
    let text = "see `experiments/2026-11-23-h100-landscape`, and genomes/fa3.toml. \
                Not crates/runtime/tests/c or experiments/<search> or experiments/my-run/merged.";
    let paths = named_paths(text);
    assert_eq!(
        paths,
        [
            "experiments/2026-11-23-h100-landscape",
            "genomes/fa3.toml",
            "crates/runtime/tests/c",
            "experiments/<search>",
            "experiments/my-run/merged",
        ]
    );
    let kept: Vec<&String> = paths
        .iter()
        .filter(|p| !is_placeholder_or_output(p))
        .collect();
    assert_eq!(
        kept,
        [
            "experiments/2026-11-23-h100-landscape",
            "genomes/fa3.toml",
            "crates/runtime/tests/c"
        ]
    );
}

/// The text between `before` and the next `after` in `text`.
fn between<'a>(text: &'a str, before: &str, after: &str) -> Option<&'a str> {
    let start = text.find(before)? + before.len();
    let len = text[start..].find(after)?;
    Some(&text[start..start + len])
}

#[test]
fn the_quick_start_champion_is_what_the_replay_gives() {
    let text = readme();
    let quick_start = between(&text, "## Quick start", "\n## ").expect("a Quick start section");
    let budget: u32 = between(
        quick_start,
        "runs an evolutionary search of ",
        " evaluations",
    )
    .expect("the quick start names the search's budget")
    .parse()
    .expect("the budget is a number");
    let optimum = between(quick_start, "a Hopper kernel at ", " µs")
        .expect("the quick start names the champion's µs");
    let banner =
        between(quick_start, "`replaying ", "`").expect("the quick start quotes the banner");
    // The device part of the banner differs where there is one; what was replayed must not.
    let replayed = format!(
        "replaying {}",
        banner
            .split(" (")
            .next()
            .expect("the banner has a replayed part")
    );

    let tmp = tempfile::tempdir().unwrap();
    let experiment = tmp.path().join("quick-start");
    // The replay backend explicitly, so a machine with a GPU checks the same figure.
    let out = evo(
        &[
            "evolve",
            "--backend",
            "replay:experiments/2026-11-23-h100-landscape",
            "--experiment",
            experiment.to_str().unwrap(),
            "-q",
        ],
        &[],
    );
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "evo evolve failed: {se}");
    let all = format!("{so}{se}");
    assert!(
        all.contains(&replayed),
        "README's banner `{replayed}` not in:\n{all}"
    );
    assert!(
        so.contains(&format!("{budget} evaluations: ")),
        "README's budget {budget} is not what the search ran:\n{so}"
    );
    let champion_line = so
        .lines()
        .find(|l| l.starts_with("champion: "))
        .unwrap_or_else(|| panic!("no champion line in:\n{so}"));
    assert!(
        champion_line.ends_with(&format!(" at {optimum} µs")),
        "README says the seed-1 champion is at {optimum} µs; the search gave `{champion_line}`"
    );
}

/// One row of a README table of `evo strategies` figures: the row's label as the binary
/// prints it, the command that prints it, and seeds at the optimum per checkpoint.
#[derive(Debug)]
struct ReplayRow {
    label: String,
    command: String,
    at_optimum: BTreeMap<u32, u32>,
}

fn cells(line: &str) -> Vec<&str> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

/// Rows of every README table whose header is `| row of `evo strategies` | command | N...`.
fn readme_replay_rows(text: &str) -> Vec<ReplayRow> {
    let mut rows = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("| row of `evo strategies` | command |") {
            continue;
        }
        let checkpoints: Vec<u32> = cells(line)[2..]
            .iter()
            .map(|c| c.parse().expect("a checkpoint column is a number"))
            .collect();
        lines.next(); // the |---| line
        for row in lines.by_ref().take_while(|l| l.starts_with('|')) {
            let c = cells(row);
            let counts = c[2..]
                .iter()
                .map(|n| n.parse().expect("a count is a number"));
            rows.push(ReplayRow {
                label: c[0].to_string(),
                command: c[1].trim_matches('`').to_string(),
                at_optimum: checkpoints.iter().copied().zip(counts).collect(),
            });
        }
    }
    rows
}

/// The "Seeds (of N) that had found the optimum itself" table of `evo strategies`' output:
/// row label to (checkpoint to count).
fn printed_at_optimum(output: &str) -> BTreeMap<String, BTreeMap<u32, u32>> {
    let table = output
        .split("that had found the optimum itself")
        .nth(1)
        .unwrap_or_else(|| panic!("no seeds-at-optimum table in:\n{output}"));
    let mut lines = table.lines().filter(|l| l.starts_with('|'));
    let header = lines.next().expect("the table has a header");
    let checkpoints: Vec<u32> = cells(header)[1..]
        .iter()
        .map(|c| c.parse().expect("a printed checkpoint is a number"))
        .collect();
    lines
        .skip(1)
        .map(|row| {
            let c = cells(row);
            let counts = c[1..].iter().map(|n| n.parse().expect("a printed count"));
            (
                c[0].to_string(),
                checkpoints.iter().copied().zip(counts).collect(),
            )
        })
        .collect()
}

#[test]
fn the_readme_replay_tables_parse() {
    let rows = readme_replay_rows(&readme());
    // The two tables: plain, random and pipelined; generational and two steady-state rows.
    assert!(rows.len() >= 6, "README replay rows: {rows:?}");
    for row in &rows {
        assert!(
            row.command.starts_with("evo strategies "),
            "a replay row's command must be `evo strategies ...`: {row:?}"
        );
        assert!(
            !row.at_optimum.is_empty(),
            "a replay row without figures: {row:?}"
        );
    }
}

/// Runs every `evo strategies` command the README's replay tables name (50 seeds each, about
/// 40 s of CPU a command; the commands run at once, each in a thread) and asserts each README
/// figure is what the binary prints now: the README's replay tables and the search cannot
/// drift apart unnoticed.
#[test]
fn the_readme_replay_tables_are_what_the_binary_prints() {
    let rows = readme_replay_rows(&readme());
    assert!(rows.len() >= 6, "README replay rows: {rows:?}");
    let mut commands: Vec<&str> = rows.iter().map(|r| r.command.as_str()).collect();
    commands.sort_unstable();
    commands.dedup();
    let printed: BTreeMap<&str, BTreeMap<String, BTreeMap<u32, u32>>> =
        std::thread::scope(|scope| {
            let runs: Vec<_> = commands
                .iter()
                .map(|&command| {
                    scope.spawn(move || {
                        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
                        let out = evo(&args, &[]);
                        assert!(out.status.success(), "`{command}` failed: {}", stderr(&out));
                        (command, printed_at_optimum(&stdout(&out)))
                    })
                })
                .collect();
            runs.into_iter()
                .map(|run| run.join().expect("a replay thread panicked"))
                .collect()
        });
    for row in &rows {
        let table = &printed[row.command.as_str()];
        let got = table.get(&row.label).unwrap_or_else(|| {
            panic!("`{}` prints no row `{}`: {table:?}", row.command, row.label)
        });
        for (checkpoint, readme_count) in &row.at_optimum {
            assert_eq!(
                got.get(checkpoint),
                Some(readme_count),
                "README says `{}` row `{}` has {readme_count} seeds at the optimum after \
                 {checkpoint} evaluations; the binary prints {:?}",
                row.command,
                row.label,
                got.get(checkpoint)
            );
        }
    }
}

#[test]
fn the_printed_table_parser_reads_evo_strategies_output() {
    let output = "Median fraction ...\n\n| strategy | 100 | 200 |\n|---|---:|---:|\n\
                  | evolutionary | 0.9 | 1.0 |\n\nSeeds (of 50) that had found the optimum \
                  itself, after N evaluations:\n\n| strategy | 100 | 200 |\n|---|---:|---:|\n\
                  | evolutionary | 10 | 37 |\n| random | 0 | 1 |\nwrote x.json\n";
    let table = printed_at_optimum(output);
    assert_eq!(
        table["evolutionary"],
        BTreeMap::from([(100, 10), (200, 37)])
    );
    assert_eq!(table["random"], BTreeMap::from([(100, 0), (200, 1)]));
}
