//! The search commands end to end through the binary, on the SYNTHETIC landscape
//! fixture (crates/mutator/tests/fixtures/synthetic-landscape; made-up numbers).

use crate::util::{evolve_synthetic as evolve, synthetic_landscape};
use std::path::Path;
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn evo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evo"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the evo binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn evolve_on_the_synthetic_landscape_writes_a_complete_experiment() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    let out = evolve(&exp, &["--budget", "40", "--seed", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        text.lines().next().unwrap(),
        "replaying 324 measurements recorded on Synthetic GPU (test fixture, not a measurement) on 2026-11-22 (no CUDA device here)"
    );
    assert!(
        text.contains("40 evaluations: 40 fresh, 0 from the cache"),
        "{text}"
    );
    assert!(text.contains("champion: "), "{text}");
    assert!(text.contains("| step | version | gene changes |"), "{text}");
    assert!(
        text.contains(&format!("report: {}", exp.join("report.md").display())),
        "{text}"
    );
    for file in [
        "experiment.toml",
        "evaluations.jsonl",
        "lineage.json",
        "report.md",
        "best_so_far.svg",
    ] {
        assert!(exp.join(file).is_file(), "{file} missing");
    }
    let log = std::fs::read_to_string(exp.join("evaluations.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 40);
    let report = std::fs::read_to_string(exp.join("report.md")).unwrap();
    assert!(
        report.contains("## Evolution path") && report.contains("## Gene changes"),
        "{report}"
    );

    // The second run answers everything from the cache and writes the same lineage.
    let lineage = std::fs::read(exp.join("lineage.json")).unwrap();
    let again = evolve(&exp, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("40 evaluations: 0 fresh, 40 from the cache (40 were on record"),
        "{}",
        stdout(&again)
    );
    assert!(
        std::fs::read(exp.join("lineage.json")).unwrap() == lineage,
        "the lineage changed"
    );

    // An option that contradicts the experiment's file is refused.
    let clash = evolve(&exp, &["--seed", "4"]);
    assert_eq!(clash.status.code(), Some(2));
    assert!(
        stderr(&clash).contains("records seed = 3, but 4 was given"),
        "{}",
        stderr(&clash)
    );

    // The other commands read the experiment.
    let lineage_md = evo(&["lineage", &exp.display().to_string()]);
    assert!(lineage_md.status.success(), "{}", stderr(&lineage_md));
    assert!(
        stdout(&lineage_md).starts_with("## Evolution path: exp"),
        "{}",
        stdout(&lineage_md)
    );
    let dot = evo(&["lineage", &exp.display().to_string(), "--dot"]);
    assert!(
        stdout(&dot).starts_with("digraph lineage {"),
        "{}",
        stdout(&dot)
    );
    let insights = evo(&["insights", &exp.display().to_string()]);
    assert!(insights.status.success(), "{}", stderr(&insights));
    assert!(stdout(&insights).contains("| change | tried | failed | helped | median speedup |"));
}

#[test]
fn evolve_resumes_after_kill_9_with_nothing_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let cut = tmp.path().join("cut");
    assert!(evolve(&whole, &["--budget", "48", "--seed", "5"])
        .status
        .success());
    assert!(evolve(&cut, &["--budget", "48", "--seed", "5"])
        .status
        .success());
    // As if killed while writing record 30: 29 whole lines and half of the 30th.
    let log = std::fs::read_to_string(cut.join("evaluations.jsonl")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let kept = lines[..29].join("\n") + "\n" + &lines[29][..lines[29].len() / 2];
    std::fs::write(cut.join("evaluations.jsonl"), kept).unwrap();
    let resumed = evolve(&cut, &[]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(
        stderr(&resumed).contains("evaluations.jsonl:30: skipped a cut-short last line"),
        "{}",
        stderr(&resumed)
    );
    assert!(
        stdout(&resumed).contains("48 evaluations: 19 fresh, 29 from the cache"),
        "{}",
        stdout(&resumed)
    );
    // Identical but for the title, which is the folder's name.
    let resumed = std::fs::read_to_string(cut.join("lineage.json")).unwrap();
    let whole = std::fs::read_to_string(whole.join("lineage.json")).unwrap();
    assert!(
        resumed == whole.replace("\"title\": \"whole\"", "\"title\": \"cut\""),
        "the resumed lineage differs"
    );
}

#[test]
fn bad_experiment_toml_names_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    std::fs::create_dir(&exp).unwrap();
    std::fs::write(
        exp.join("experiment.toml"),
        "name = \"exp\"\nstrategy = \"evolutionary\"\nseed = 1\nbackend = \"auto\"\n\n[budget]\nevaluations = 10\n\n[evolutionary]\npopulation = 1\n",
    )
    .unwrap();
    let out = evolve(&exp, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("experiment.toml:10: field `evolutionary.population`: population = 1 must be at least 2"),
        "{err}"
    );
}

#[test]
fn strategies_compares_on_a_landscape() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("strategies.json");
    let out = evo(&[
        "strategies",
        "--landscape",
        &synthetic_landscape().display().to_string(),
        "--seeds",
        "4",
        "--checkpoints",
        "10,25",
        "--steady",
        "--in-flight",
        "1,4",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("replaying 324 measurements"), "{text}");
    assert!(
        text.contains("| strategy | 10 | 25 |")
            && text.contains("| evolutionary |")
            && text.contains("| evolutionary, steady-state (4 in flight) |")
            && text.contains("| random |"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 4);
}

#[test]
fn lineage_of_the_seeds_shows_the_hand_evolution() {
    let out = evo(&["lineage", "--seeds"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for step in [
        "| 0 | v3 |",
        "| 1 | v5 | qk_math scalar→wmma | 1980.0 | 0.88× |",
        "| 4 | fa2 |",
    ] {
        assert!(text.contains(step), "{step} missing in\n{text}");
    }
}

#[test]
fn replay_without_a_landscape_says_how_to_get_one() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-landscape");
    let out = evo(&[
        "evolve",
        "--experiment",
        &tmp.path().join("exp").display().to_string(),
        "--backend",
        &format!("replay:{}", missing.display()),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("landscape.toml: cannot read the recorded landscape"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("evo landscape"), "{}", stderr(&out));
}

#[test]
fn exhaustive_walks_the_landscape_sub_space_and_a_wall_budget_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = evolve(
        &tmp.path().join("walk"),
        &["--strategy", "exhaustive", "--budget", "1000"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("312 evaluations: 312 fresh")
            && text.contains("stopped: every reachable genome evaluated"),
        "{text}"
    );
    let timed = evolve(&tmp.path().join("timed"), &["--minutes", "0.05"]);
    assert!(timed.status.success(), "{}", stderr(&timed));
    assert!(stdout(&timed).contains("champion: "), "{}", stdout(&timed));
}

/// `--pipeline` is recorded in experiment.toml and the report, resumes like any
/// experiment, and cannot be switched on for an experiment recorded without it.
#[test]
fn a_pipelined_search_is_recorded_and_resumed_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    let out = evolve(&exp, &["--budget", "48", "--seed", "4", "--pipeline"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("48 evaluations: 48 fresh"),
        "{}",
        stdout(&out)
    );
    let toml = std::fs::read_to_string(exp.join("experiment.toml")).unwrap();
    assert!(toml.contains("pipeline = true"), "{toml}");
    let report = std::fs::read_to_string(exp.join("report.md")).unwrap();
    assert!(report.contains("pipelined generations"), "{report}");
    let more = evolve(&exp, &["--budget", "64"]);
    assert!(more.status.success(), "{}", stderr(&more));
    assert!(
        stdout(&more).contains("64 evaluations: 16 fresh, 48 from the cache"),
        "{}",
        stdout(&more)
    );
    let plain = tmp.path().join("plain");
    assert!(evolve(&plain, &["--budget", "16"]).status.success());
    let clash = evolve(&plain, &["--budget", "32", "--pipeline"]);
    assert_eq!(clash.status.code(), Some(2));
    assert!(
        stderr(&clash).contains("records [evolutionary] pipeline = false, but true was given"),
        "{}",
        stderr(&clash)
    );
}

/// `--steady` is recorded in experiment.toml with its in-flight count (replay's own
/// when none is given) and in the report; a re-run replays the recorded answers into
/// the same lineage, and the count cannot change on resume.
#[test]
fn a_steady_search_is_recorded_and_replayed_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    let out = evolve(
        &exp,
        &[
            "--budget",
            "48",
            "--seed",
            "4",
            "--steady",
            "--in-flight",
            "5",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let toml = std::fs::read_to_string(exp.join("experiment.toml")).unwrap();
    assert!(
        toml.contains("steady = true") && toml.contains("in_flight = 5"),
        "{toml}"
    );
    let report = std::fs::read_to_string(exp.join("report.md")).unwrap();
    assert!(report.contains("steady-state with 5 in flight"), "{report}");
    let lineage = std::fs::read_to_string(exp.join("lineage.json")).unwrap();
    let again = evolve(&exp, &[]);
    assert!(
        stdout(&again).contains("48 evaluations: 0 fresh, 48 from the cache"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        std::fs::read_to_string(exp.join("lineage.json")).unwrap(),
        lineage
    );
    let clash = evolve(&exp, &["--in-flight", "6", "--steady"]);
    assert_eq!(clash.status.code(), Some(2));
    assert!(
        stderr(&clash).contains("records [evolutionary] in_flight = 5, but 6 was given"),
        "{}",
        stderr(&clash)
    );
    let own = tmp.path().join("own");
    assert!(evolve(&own, &["--budget", "20", "--steady"])
        .status
        .success());
    let toml = std::fs::read_to_string(own.join("experiment.toml")).unwrap();
    assert!(
        toml.contains("in_flight = 1"),
        "replay answers at once: {toml}"
    );
}

/// Sets the wall time a lineage on file records as spent (as if earlier runs took it).
fn set_wall_s(lineage: &Path, seconds: &str) {
    let text = std::fs::read_to_string(lineage).unwrap();
    assert!(text.contains("\"wall_s\": "), "{text}");
    let edited: String = text
        .split_inclusive('\n')
        .map(|l| match l.trim_start().starts_with("\"wall_s\": ") {
            true => format!("  \"wall_s\": {seconds},\n"),
            false => l.to_string(),
        })
        .collect();
    std::fs::write(lineage, edited).unwrap();
}

/// `--minutes` is a total across resumes: the lineage records the time spent, a resume
/// says how much and goes on from there, one whose time is spent replays its record
/// and stops, and a larger total counts the time spent.
#[test]
fn a_wall_budget_is_a_total_across_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp");
    let lineage = exp.join("lineage.json");
    let first = evolve(&exp, &["--strategy", "exhaustive", "--minutes", "10"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(!stdout(&first).contains("resuming:"), "{}", stdout(&first));
    let nodes = || {
        let l = evo_lineage::Lineage::load(&lineage).unwrap();
        (l.nodes().cloned().collect::<Vec<_>>(), l.wall_s)
    };
    let (recorded, spent) = nodes();
    assert!(spent.is_some_and(|s| s < 60.0), "{spent:?}");

    set_wall_s(&lineage, "564.0");
    let resumed = evolve(&exp, &[]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let text = stdout(&resumed);
    assert!(
        text.contains("\nresuming: 9.4 of 10 minutes already spent\n")
            && text.contains("312 evaluations: 0 fresh, 312 from the cache"),
        "{text}"
    );
    assert!(nodes().1.is_some_and(|s| s >= 564.0), "{:?}", nodes().1);

    // Spent: the record is replayed, the search stops, the lineage is all there.
    set_wall_s(&lineage, "600.0");
    let spent = evolve(&exp, &[]);
    assert!(spent.status.success(), "{}", stderr(&spent));
    let text = stdout(&spent);
    assert!(
        text.contains("resuming: 10.0 of 10 minutes already spent; replaying the record only")
            && text.contains("312 evaluations: 0 fresh, 312 from the cache")
            && text.contains("stopped: budget spent")
            && text.contains("champion: "),
        "{text}"
    );
    assert_eq!(nodes().0, recorded);

    // A larger total counts the time spent.
    let more = evolve(&exp, &["--minutes", "20"]);
    assert!(more.status.success(), "{}", stderr(&more));
    assert!(
        stdout(&more).contains("resuming: 10.0 of 20 minutes already spent\n"),
        "{}",
        stdout(&more)
    );

    // A steady-state search submits nothing once its time is spent, so its resume is
    // refused and its lineage kept.
    let steady = tmp.path().join("steady");
    let lineage = steady.join("lineage.json");
    assert!(evolve(&steady, &["--steady", "--minutes", "10"])
        .status
        .success());
    set_wall_s(&lineage, "600.0");
    let kept = std::fs::read(&lineage).unwrap();
    let refused = evolve(&steady, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused)
            .contains("lineage.json: records wall_s = 600, all of budget.minutes = 10 in ")
            && stderr(&refused).contains("give --minutes larger than 10 to go on"),
        "{}",
        stderr(&refused)
    );
    assert!(
        std::fs::read(&lineage).unwrap() == kept,
        "the lineage changed"
    );
}
