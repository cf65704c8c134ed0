//! Nothing measured is lost: a resume that disagrees with its record is refused, a budget
//! only grows, a folder evo did not write is not taken over, a folder being written is
//! locked, and the writers (`merge`, `landscape`, `lineage`, `strategies`) check their
//! destination before they work. On the SYNTHETIC landscape fixture (made-up numbers).

use crate::util::{
    evo, evolve_synthetic as evolve, repo_root, stderr, stdout, synthetic_landscape,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Exit 2 with `needle` in stderr, and no panic.
fn refused(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected `{needle}` in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn resume_refuses_an_option_that_changes_what_is_searched() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    assert!(evolve(&exp, &["--budget", "16"]).status.success());
    let record = read(&exp.join("experiment.toml"));
    refused(
        &evolve(&exp, &["--problem", "1,8,1024,1024,64,f16"]),
        "records problem = none (the backend's own shape), but 1,8,1024,1024,64,f16 was given; drop the option to resume, or use a new --experiment folder",
    );
    refused(
        &evolve(&exp, &["--suite", "anchors"]),
        "records suite = none (one problem), but anchors (",
    );
    refused(
        &evolve(&exp, &["--population", "8"]),
        "records population = 16, but 8 was given",
    );
    assert_eq!(read(&exp.join("experiment.toml")), record);
}

#[test]
fn a_budget_is_a_total_that_only_grows() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    assert!(evolve(&exp, &["--budget", "40", "--seed", "2"])
        .status
        .success());
    let lineage = read(&exp.join("lineage.json"));
    refused(
        &evolve(&exp, &["--budget", "20"]),
        "records budget.evaluations = 40, a total; --budget 20 would cut the recorded lineage short: give --budget 40 or more to go on, or drop the option",
    );
    refused(
        &evolve(&exp, &["--minutes", "5"]),
        "records budget.evaluations = 40; --minutes 5 counts wall time, which cannot be compared with it",
    );
    assert_eq!(
        read(&exp.join("lineage.json")),
        lineage,
        "the lineage shrank"
    );
    let more = evolve(&exp, &["--budget", "48"]);
    assert!(more.status.success(), "{}", stderr(&more));
    assert!(
        stdout(&more).contains("48 evaluations: 8 fresh, 40 from the cache"),
        "{}",
        stdout(&more)
    );
    assert!(read(&exp.join("experiment.toml")).contains("evaluations = 48"));
}

#[test]
fn numeric_options_out_of_range_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    for (option, value, needle) in [
        (
            "--budget",
            "0",
            "give a whole number of evaluations from 1 to",
        ),
        ("--budget", "-1", "give a whole number of evaluations"),
        (
            "--minutes",
            "1e308",
            "give a number of minutes above 0 and at most 525600 (a year)",
        ),
        ("--minutes", "inf", "give a number of minutes above 0"),
        ("--minutes", "nan", "give a number of minutes above 0"),
        ("--minutes", "-1", "give a number of minutes above 0"),
        ("--minutes", "0", "give a number of minutes above 0"),
        (
            "--timeout",
            "0",
            "give a whole number of seconds from 1 to 86400",
        ),
        (
            "--timeout",
            "18446744073709551615",
            "give a whole number of seconds",
        ),
        (
            "--population",
            "0",
            "give a whole number of candidates from 1 to",
        ),
    ] {
        // `--budget=-1`: as one word, a negative number reaches the option's parser.
        let out = evolve(&exp, &[&format!("{option}={value}")]);
        refused(&out, &format!("invalid value '{value}' for '{option}"));
        refused(&out, needle);
        assert!(!exp.exists(), "{option} {value} left a folder");
    }
}

/// A folder written by an older build with an unbounded wall budget: an error naming the
/// field, not a panic on every resume.
#[test]
fn a_recorded_budget_no_duration_holds_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    std::fs::create_dir(&exp).unwrap();
    std::fs::write(
        exp.join("experiment.toml"),
        "name = \"exp\"\nstrategy = \"evolutionary\"\nseed = 1\nbackend = \"auto\"\n\n[budget]\nminutes = 1e308\n",
    )
    .unwrap();
    refused(
        &evolve(&exp, &[]),
        "experiment.toml:7: field `budget.minutes`: 1e308 is out of range: give a number of minutes above 0 and at most 525600 (a year)",
    );
}

#[test]
fn a_folder_evo_did_not_write_as_an_experiment_is_not_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    std::fs::create_dir(&exp).unwrap();
    std::fs::write(exp.join("evaluations.jsonl"), "{\"kept\": true}\n").unwrap();
    std::fs::write(exp.join("lineage.json"), "{}").unwrap();
    refused(
        &evolve(&exp, &["--budget", "8"]),
        "exp holds evaluations.jsonl, lineage.json but no experiment.toml: it is not an experiment evo can resume",
    );
    assert_eq!(read(&exp.join("evaluations.jsonl")), "{\"kept\": true}\n");
    let names: Vec<_> = std::fs::read_dir(&exp).unwrap().collect();
    assert_eq!(
        names.len(),
        2,
        "the refused folder was written to: {names:?}"
    );
    // An empty folder is a new experiment.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(evolve(&empty, &["--budget", "8"]).status.success());
}

/// A start that fails before the search can run leaves no record fixing its options: the
/// next start with a working backend is not refused for a backend that never ran.
#[test]
fn a_failed_start_fixes_nothing_in_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    let missing = format!("replay:{}", tmp.path().join("no-landscape").display());
    let exp_arg = exp.display().to_string();
    let failed = evo(
        &[
            "evolve",
            "--backend",
            &missing,
            "--experiment",
            &exp_arg,
            "--quiet",
        ],
        &[],
    );
    refused(&failed, "cannot read the recorded landscape");
    assert!(!exp.exists(), "the failed start left {}", exp.display());
    let started = evolve(&exp, &["--budget", "8"]);
    assert!(started.status.success(), "{}", stderr(&started));
}

/// A search, or anything holding the folder's lock, keeps a second `evo evolve` out.
#[test]
fn a_second_search_on_a_locked_folder_is_refused_and_names_the_holder() {
    use evo_gates::outcome::files::FolderLock;
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    assert!(evolve(&exp, &["--budget", "8"]).status.success());
    let lineage = read(&exp.join("lineage.json"));
    let held = FolderLock::acquire(&exp, "pid 1: evo evolve --budget 400").unwrap();
    refused(
        &evolve(&exp, &["--budget", "16"]),
        "is being written by another evo process (pid 1: evo evolve --budget 400); wait for it to finish, or use another folder",
    );
    assert_eq!(read(&exp.join("lineage.json")), lineage);
    assert!(read(&exp.join("experiment.toml")).contains("evaluations = 8"));
    drop(held);
    assert!(evolve(&exp, &["--budget", "16"]).status.success());
}

/// A resume that would search on another device or landscape than the recorded lineage's
/// is refused instead of replacing that lineage.
#[test]
fn a_lineage_recorded_on_another_device_is_not_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    assert!(evolve(&exp, &["--budget", "8"]).status.success());
    let path = exp.join("lineage.json");
    let other = read(&path).replace(
        "\"device\": \"Synthetic GPU (test fixture, not a measurement)\"",
        "\"device\": \"NVIDIA H100 80GB HBM3\"",
    );
    assert_ne!(other, read(&path), "the fixture's device name changed");
    std::fs::write(&path, &other).unwrap();
    refused(
        &evolve(&exp, &[]),
        "lineage.json: records a search on `NVIDIA H100 80GB HBM3` for B1 H8 L512 D64 f16, but this run searches on `Synthetic GPU",
    );
    assert_eq!(read(&path), other);
}

/// The quick start run twice resumes its default folder; run with a lower budget or other
/// options, it moves to the next free name instead of failing or overwriting.
#[test]
fn the_default_folder_resumes_the_same_search_and_moves_on_for_another() {
    let tmp = tempfile::tempdir().unwrap();
    let backend = format!("replay:{}", synthetic_landscape().display());
    let genomes = repo_root().join("genomes").display().to_string();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_evo"))
            .current_dir(tmp.path())
            .args(["evolve", "--backend", &backend, "--genomes", &genomes])
            .args(["--quiet"])
            .args(extra)
            .output()
            .unwrap()
    };
    let first = run(&["--budget", "16"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = run(&["--budget", "16"]);
    assert!(
        stdout(&again).contains("16 evaluations: 0 fresh, 16 from the cache"),
        "{}",
        stdout(&again)
    );
    let experiments = tmp.path().join("experiments");
    let only: Vec<_> = std::fs::read_dir(&experiments).unwrap().collect();
    assert_eq!(only.len(), 1, "the same search took a second folder");
    let first_lineage = only[0].as_ref().unwrap().path().join("lineage.json");
    let lineage = read(&first_lineage);
    let lower = run(&["--budget", "8"]);
    assert!(lower.status.success(), "{}", stderr(&lower));
    let folders: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(&experiments)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(folders.len(), 2, "{folders:?}");
    assert!(folders[1].ends_with("-s1-2"), "{folders:?}");
    assert!(
        stderr(&lower).contains("note: not resumed:")
            && stderr(&lower).contains("--budget 8 would cut the recorded lineage short"),
        "{}",
        stderr(&lower)
    );
    assert_eq!(read(&first_lineage), lineage, "the first lineage changed");
}

/// Two islands of one search on the fixture, run one after the other.
fn islands(root: &Path) -> Vec<PathBuf> {
    let exchange = root.join("exchange").display().to_string();
    (0..2)
        .map(|k| {
            let exp = root.join(format!("island-{k}"));
            let out = evolve(
                &exp,
                &[
                    "--budget",
                    "16",
                    "--island",
                    &k.to_string(),
                    "--islands",
                    "2",
                    "--exchange",
                    &exchange,
                ],
            );
            assert!(out.status.success(), "{}", stderr(&out));
            exp
        })
        .collect()
}

fn merge(out: &Path, experiments: &[PathBuf], extra: &[&str]) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(experiments.iter().map(|p| p.display().to_string()));
    args.extend(["--out".to_string(), out.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    evo(&args, &[])
}

#[test]
fn merge_never_writes_into_what_it_reads_nor_over_what_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = islands(tmp.path());
    let lineage = read(&inputs[0].join("lineage.json"));
    refused(&merge(&inputs[0], &inputs, &[]), "island-0 is the island");
    // The same folder spelled another way is still the same folder.
    refused(
        &merge(&inputs[1].join("..").join("island-1"), &inputs, &[]),
        "is the island",
    );
    refused(
        &merge(&inputs[0].join("merged"), &inputs, &[]),
        "lies inside the island",
    );
    refused(&merge(tmp.path(), &inputs, &[]), "contains the island");
    let twice = evo(
        &[
            "insights",
            &inputs[0].display().to_string(),
            &inputs[0].join(".").display().to_string(),
        ],
        &[],
    );
    refused(&twice, "are one experiment; give each experiment once");
    assert_eq!(read(&inputs[0].join("lineage.json")), lineage);
    assert!(!inputs[0].join("merged").exists());
    refused(
        &merge(
            tmp.path().join("x").as_path(),
            &[inputs[0].clone(), inputs[0].clone()],
            &[],
        ),
        "are both island 0; give each island once",
    );

    let notes = tmp.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("report.md"), "my notes").unwrap();
    refused(
        &merge(&notes, &inputs, &[]),
        "holds report.md and was not written by `evo merge`; choose a new folder, or pass --force",
    );
    assert_eq!(read(&notes.join("report.md")), "my notes");
    let forced = merge(&notes, &inputs, &["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));

    // A merge's own folder is a merge's to replace.
    let merged = tmp.path().join("merged");
    assert!(merge(&merged, &inputs, &[]).status.success());
    assert!(read(&merged.join("merge.toml")).contains("island-1"));
    let again = merge(&merged, &inputs, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
}

#[test]
fn landscape_refuses_an_out_that_holds_another_plan_or_no_landscape() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::copy(
        synthetic_landscape().join("landscape.toml"),
        out.join("landscape.toml"),
    )
    .unwrap();
    let plan = tmp.path().join("plan.toml");
    // The recorded landscape's own plan, for another length.
    let text = read(&repo_root().join("experiments/2026-11-23-h100-landscape/plan.toml"));
    let other = text
        .replace("q_len = 512", "q_len = 1024")
        .replace("kv_len = 512", "kv_len = 1024");
    assert_ne!(text, other, "the plan's lengths changed");
    std::fs::write(&plan, other).unwrap();
    let run = |out: &Path| {
        evo(
            &[
                "landscape",
                "--plan",
                &plan.display().to_string(),
                "--out",
                &out.display().to_string(),
            ],
            &[],
        )
    };
    refused(
        &run(&out),
        "landscape.toml: records problem 1,8,512,512,64,f16, but the plan",
    );
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("lineage.json"), "{}").unwrap();
    refused(
        &run(&foreign),
        "holds lineage.json but no landscape.toml: it is not a landscape; choose a new --out",
    );
}

#[test]
fn lineage_and_strategies_refuse_to_replace_a_file_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    assert!(evolve(&exp, &["--budget", "8"]).status.success());
    let recorded = exp.join("lineage.json");
    let before = read(&recorded);
    let exp_arg = exp.display().to_string();
    let save = recorded.display().to_string();
    refused(
        &evo(&["lineage", "--seeds", "--save", &save], &[]),
        "exists (",
    );
    refused(
        &evo(&["lineage", "--seeds", "--save", &save], &[]),
        "bytes); pass --force to replace it, or name a new file",
    );
    assert_eq!(read(&recorded), before, "the search's lineage was replaced");
    let elsewhere = tmp.path().join("missing").join("l.json");
    refused(
        &evo(
            &[
                "lineage",
                &exp_arg,
                "--save",
                &elsewhere.display().to_string(),
            ],
            &[],
        ),
        "does not exist; create it first",
    );

    let json = tmp.path().join("notes.json");
    std::fs::write(&json, "{\"mine\": 1}").unwrap();
    let strategies = |extra: &[&str]| {
        let mut args = vec![
            "strategies".to_string(),
            "--landscape".into(),
            synthetic_landscape().display().to_string(),
            "--seeds".into(),
            "2".into(),
            "--checkpoints".into(),
            "10".into(),
            "--json".into(),
            json.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        evo(&args, &[])
    };
    refused(
        &strategies(&[]),
        "notes.json exists (11 bytes); pass --force to replace it, or name a new file",
    );
    assert_eq!(read(&json), "{\"mine\": 1}");
    let forced = strategies(&["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(read(&json).contains("\"rows\""));
    refused(
        &evo(
            &[
                "strategies",
                "--landscape",
                &synthetic_landscape().display().to_string(),
                "--seeds",
                "0",
            ],
            &[],
        ),
        "give a whole number of runs from 1 to",
    );
}

/// Two searches started as the same island would overwrite each other's elites in the
/// exchange: the second is refused while the first runs.
#[test]
fn a_second_search_as_the_same_island_is_refused() {
    use evo_gates::outcome::files::FolderLock;
    let tmp = tempfile::tempdir().unwrap();
    let exchange = tmp.path().join("exchange");
    let claimed = exchange.join("island-0");
    std::fs::create_dir_all(&claimed).unwrap();
    let held = FolderLock::acquire(&claimed, "pid 1: evo evolve --island 0").unwrap();
    let exchange = exchange.display().to_string();
    let island = |exp: &Path| {
        evolve(
            exp,
            &[
                "--budget",
                "16",
                "--island",
                "0",
                "--islands",
                "2",
                "--exchange",
                &exchange,
            ],
        )
    };
    refused(
        &island(&tmp.path().join("second")),
        "island 0 is already running: ",
    );
    refused(
        &island(&tmp.path().join("second")),
        "is being written by another evo process (pid 1: evo evolve --island 0)",
    );
    drop(held);
    let out = island(&tmp.path().join("second"));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Another landscape of the same device (here: the fixture with another template hash)
/// shares no record with the experiment: the resume is refused, not started over.
#[test]
fn a_resume_that_would_reuse_no_record_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let landscape = tmp.path().join("landscape");
    std::fs::create_dir(&landscape).unwrap();
    for file in ["landscape.toml", "evaluations.jsonl"] {
        std::fs::copy(synthetic_landscape().join(file), landscape.join(file)).unwrap();
    }
    let backend = format!("replay:{}", landscape.display());
    let exp = tmp.path().join("exp");
    let exp_arg = exp.display().to_string();
    let run = || {
        evo(
            &[
                "evolve",
                "--backend",
                &backend,
                "--experiment",
                &exp_arg,
                "--budget",
                "8",
                "--quiet",
            ],
            &[],
        )
    };
    assert!(run().status.success());
    let lineage = read(&exp.join("lineage.json"));
    let meta = read(&landscape.join("landscape.toml"));
    let other = meta.replace("template_hash = \"synthetic\"", "template_hash = \"other\"");
    assert_ne!(meta, other, "the fixture's template hash changed");
    std::fs::write(landscape.join("landscape.toml"), other).unwrap();
    refused(
        &run(),
        "evaluations.jsonl: none of its 8 records is for this search (template other,",
    );
    assert_eq!(read(&exp.join("lineage.json")), lineage);
}
