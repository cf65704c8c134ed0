//! The island model end to end: islands as separate `evo evolve` processes on the
//! recorded H100 landscape (replay backend), a real `kill -9` and resume, and `evo merge`.

use crate::util::{repo_root, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const LANDSCAPE: &str = "experiments/2026-11-22-h100-landscape";

fn island_command(exp: &Path, exchange: &Path, island: u32, islands: u32, budget: u32) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_evo"));
    cmd.current_dir(repo_root()).args([
        "evolve",
        "--backend",
        &format!("replay:{LANDSCAPE}"),
        "--experiment",
        &exp.display().to_string(),
        "--island",
        &island.to_string(),
        "--islands",
        &islands.to_string(),
        "--exchange",
        &exchange.display().to_string(),
        "--budget",
        &budget.to_string(),
        "--quiet",
    ]);
    cmd
}

fn run_island(exp: &Path, exchange: &Path, island: u32, islands: u32, budget: u32) -> Output {
    island_command(exp, exchange, island, islands, budget)
        .output()
        .expect("the evo binary runs")
}

fn evo(args: &[&str]) -> Output {
    crate::util::evo(args, &[])
}

fn merge(out: &Path, experiments: &[PathBuf]) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(experiments.iter().map(|p| p.display().to_string()));
    args.extend(["--out".to_string(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    evo(&args)
}

fn optimum_us() -> f64 {
    let landscape = evo_mutator::Landscape::load(&repo_root().join(LANDSCAPE)).unwrap();
    landscape
        .optimum()
        .expect("the landscape has passing points")
        .1
}

fn lineage_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("lineage.json")).unwrap()).unwrap()
}

#[test]
fn islands_as_processes_reach_the_optimum_and_merge_deterministically() {
    let tmp = tempfile::tempdir().unwrap();
    let exchange = tmp.path().join("exchange");
    let islands = 3;
    let experiments: Vec<PathBuf> = (0..islands)
        .map(|k| tmp.path().join(format!("island-{k}")))
        .collect();
    // All at once, as a job array runs them.
    let children: Vec<Child> = experiments
        .iter()
        .enumerate()
        .map(|(k, exp)| {
            // 240 each: what the islands see of each other depends on timing, and every
            // island must reach the optimum whatever it took in (120 did not always).
            island_command(exp, &exchange, k as u32, islands, 240)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("island ") && stdout(&out).contains("240 evaluations"),
            "{}",
            stdout(&out)
        );
    }
    for k in 0..islands {
        assert!(
            exchange
                .join(format!("island-{k}"))
                .read_dir()
                .unwrap()
                .count()
                > 0,
            "island {k} published nothing"
        );
    }

    let merged = tmp.path().join("merged");
    let out = merge(&merged, &experiments);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("merged 3 islands")
            && stdout(&out).contains("720 evaluation records"),
        "{}",
        stdout(&out)
    );
    let optimum = optimum_us();
    let lineage = evo_lineage::Lineage::load(&merged.join("lineage.json")).unwrap();
    let champion = lineage.champion().expect("a champion");
    assert_eq!(champion.score_us(), Some(optimum), "{}", stdout(&out));
    // One graph: nodes of every island, none an immigrant, migration edges kept.
    for k in 0..islands {
        assert!(
            lineage.nodes().any(|n| n.island == Some(k)),
            "no node of island {k}"
        );
    }
    assert!(lineage.nodes().all(|n| !n.is_immigrant()));
    // Every child an island bred from an immigrant has its edge from the node that
    // measured the immigrant, on another island.
    let mut migrations = 0;
    for (k, exp) in experiments.iter().enumerate() {
        let own = evo_lineage::Lineage::load(&exp.join("lineage.json")).unwrap();
        // A genome another island measured too is kept as the merge first reached it.
        let kept_here = |n: &&evo_lineage::Node| {
            lineage.get(&n.id).unwrap().island == Some(k as u32) && !n.is_immigrant()
        };
        for node in own.nodes().filter(kept_here) {
            for parent in own.parents(&node.id).iter().filter(|p| p.is_immigrant()) {
                let merged_parent = lineage.get(&parent.id).unwrap();
                assert_ne!(merged_parent.island, node.island);
                assert!(lineage.parents(&node.id).iter().any(|p| p.id == parent.id));
                migrations += 1;
            }
        }
    }
    assert!(migrations > 0, "no island bred from an immigrant");
    assert!(
        stdout(&out).contains(&format!("{migrations} migration edges")),
        "{}",
        stdout(&out)
    );
    let records = std::fs::read_to_string(merged.join("evaluations.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 720);

    // Deterministic: the same inputs, in any order, give the same files.
    let again = tmp.path().join("again");
    let mut reversed = experiments.clone();
    reversed.reverse();
    let out = merge(&again, &reversed);
    assert!(out.status.success(), "{}", stderr(&out));
    for file in ["lineage.json", "evaluations.jsonl", "report.md"] {
        let a = std::fs::read_to_string(merged.join(file)).unwrap();
        let b = std::fs::read_to_string(again.join(file)).unwrap();
        assert!(
            a == b.replace("again", "merged"),
            "{file} differs between two merges"
        );
    }

    // The other commands read the merged experiment like any other.
    let table = evo(&["lineage", &merged.display().to_string()]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(stdout(&table).starts_with("## Evolution path: merged"));
    let insights = evo(&["insights", &merged.display().to_string()]);
    assert!(insights.status.success(), "{}", stderr(&insights));
    assert!(stdout(&insights).contains("| change | tried | failed | helped | median speedup |"));

    // Island 1 alone cannot stand when it bred from another island's elite.
    let alone = evo_lineage::Lineage::load(&experiments[1].join("lineage.json")).unwrap();
    let bred_from_immigrant = alone
        .nodes()
        .any(|n| alone.parents(&n.id).iter().any(|p| p.is_immigrant()));
    let partial = merge(&tmp.path().join("partial"), &experiments[1..2]);
    assert_eq!(
        partial.status.success(),
        !bred_from_immigrant,
        "{}",
        stderr(&partial)
    );
    if bred_from_immigrant {
        assert!(
            stderr(&partial).contains("pass every island's experiment"),
            "{}",
            stderr(&partial)
        );
    }
}

/// Lines of a file, 0 when it does not exist yet.
fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[test]
fn a_killed_island_resumes_with_nothing_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let exchange = tmp.path().join("exchange");
    let budget = 300;
    // The other two islands publish first, so island 0 sees the same exchange every run.
    for k in 1..3 {
        let out = run_island(
            &tmp.path().join(format!("island-{k}")),
            &exchange,
            k,
            3,
            budget,
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let whole = tmp.path().join("whole");
    let out = run_island(&whole, &exchange, 0, 3, budget);
    assert!(out.status.success(), "{}", stderr(&out));

    // Killed for real, mid-way: SIGKILL once it has recorded some evaluations.
    let cut = tmp.path().join("cut");
    let log = cut.join("evaluations.jsonl");
    let mut child = island_command(&cut, &exchange, 0, 3, budget)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while lines(&log) < 40 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the island finished before it could be killed"
    );
    let at_kill = std::fs::read_to_string(&log).unwrap();
    let whole_records = at_kill.lines().filter(|l| l.ends_with('}')).count();
    assert!(
        whole_records >= 40 && whole_records < budget as usize,
        "killed after {whole_records} records"
    );

    let resumed = run_island(&cut, &exchange, 0, 3, budget);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    // Every record on file at the kill is reused, not measured again.
    let text = stdout(&resumed);
    let hits: usize = text
        .split(" from the cache")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cache count in: {text}"));
    assert!(hits >= whole_records, "{text}");
    let after = std::fs::read_to_string(&log).unwrap();
    for line in at_kill.lines().filter(|l| l.ends_with('}')) {
        assert!(
            after.contains(line),
            "a record recorded before the kill is gone"
        );
    }
    // The resumed island retraced the uninterrupted one: same lineage, same intakes.
    let mut a = lineage_json(&whole);
    let mut b = lineage_json(&cut);
    a["meta"]["title"] = "".into();
    b["meta"]["title"] = "".into();
    assert!(a == b, "the resumed island's lineage differs");
    assert_eq!(
        std::fs::read_to_string(whole.join("migrants.jsonl")).unwrap(),
        std::fs::read_to_string(cut.join("migrants.jsonl")).unwrap()
    );
    assert!(
        b["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["operators"][0]["op"] == "immigrant"),
        "island 0 took in no immigrant"
    );
}

#[test]
fn island_options_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let exchange = tmp.path().join("x");
    let out = run_island(&tmp.path().join("bad"), &exchange, 3, 3, 10);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--island and its options: island = 3 must be below islands = 3"),
        "{}",
        stderr(&out)
    );
    let random = evo(&[
        "evolve",
        "--backend",
        &format!("replay:{LANDSCAPE}"),
        "--experiment",
        &tmp.path().join("random").display().to_string(),
        "--strategy",
        "random",
        "--island",
        "0",
        "--islands",
        "2",
        "--exchange",
        &exchange.display().to_string(),
    ]);
    assert!(
        stderr(&random).contains("strategy = \"random\" has none"),
        "{}",
        stderr(&random)
    );
    let not_island = evo(&[
        "merge",
        LANDSCAPE,
        "--out",
        &tmp.path().join("m").display().to_string(),
    ]);
    assert!(!not_island.status.success());
    assert!(
        stderr(&not_island).contains("experiment.toml"),
        "{}",
        stderr(&not_island)
    );
}
