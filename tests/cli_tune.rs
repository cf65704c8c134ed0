//! `evo tune` without a GPU: the presets it lists, the inputs it refuses, and a whole
//! tune of the recorded landscape's shape (searches replayed, nothing measured here):
//! its plan, search, champions and table, a rerun that changes nothing, and the folders
//! it will not take over.

use crate::util::{evo, stderr, stdout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The recorded H100 landscape: it answers B1 H8 L512 D64 f16 only.
const LANDSCAPE: &str = "replay:experiments/2026-11-23-h100-landscape";

/// Exit 2 with `needle` in stderr, and no panic.
fn refused(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}\n{}", stdout(out));
    assert!(err.contains(needle), "expected `{needle}` in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `evo tune --problem 1,8,512,512,64,f16 --budget BUDGET --strategy evolutionary
/// --backend replay:<landscape> --out OUT`.
fn tune(out: &Path, budget: &str) -> Output {
    tune_on(out, budget, LANDSCAPE)
}

/// [`tune`] with another `--backend`.
fn tune_on(out: &Path, budget: &str, backend: &str) -> Output {
    let out = out.display().to_string();
    evo(
        &[
            "tune",
            "--problem",
            "1,8,512,512,64,f16",
            "--budget",
            budget,
            "--strategy",
            "evolutionary",
            "--backend",
            backend,
            "--out",
            &out,
        ],
        &[],
    )
}

/// Every file under `dir` (lock files aside: each run writes its holder there) and its
/// bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().unwrap() != ".evo.lock" {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn list_models_shows_every_preset_with_its_shapes_and_source() {
    let out = evo(&["tune", "--list-models"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for name in [
        "llama-3-8b",
        "llama-3-70b",
        "mistral-7b",
        "mixtral-8x7b",
        "gemma-2-9b",
        "phi-3-mini",
        "qwen2.5-7b",
    ] {
        assert!(
            text.contains(&format!("{name}: ")),
            "{name} missing:\n{text}"
        );
    }
    assert_eq!(text.matches("  source: ").count(), 7, "{text}");
    assert!(text.contains("llama-3-8b: 32 heads, 8 K/V heads, head dim 128; 7 shapes"));
    assert!(
        text.contains("1,32,2048,2048,128,f16,causal,kv=8"),
        "{text}"
    );
    assert!(
        text.contains("64,32,1,32768,128,f16,causal=br,kv=8"),
        "{text}"
    );
    assert!(text.contains(
        "gemma-2-9b: 16 heads, 8 K/V heads, head dim 256, window 4096 on alternate layers"
    ));

    let unknown = evo(&["tune", "--model", "llama-4"], &[]);
    refused(
        &unknown,
        "--model llama-4: no such preset; the presets are llama-3-8b, llama-3-70b, mistral-7b",
    );
}

#[test]
fn a_problems_file_with_a_bad_line_is_refused_naming_file_line_and_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("shapes.txt");
    std::fs::write(
        &file,
        "# the model's shapes\n1,8,512,512,64,f16\n1,8,512,512,64,f16,causl\n",
    )
    .unwrap();
    let out_dir = tmp.path().join("t");
    let out = evo(
        &[
            "tune",
            "--problems",
            &file.display().to_string(),
            "--out",
            &out_dir.display().to_string(),
        ],
        &[],
    );
    refused(
        &out,
        "shapes.txt:3: `1,8,512,512,64,f16,causl`: `causl` is not an option",
    );
    refused(&out, "or comment the line out with #");
    assert!(!out_dir.exists(), "a refused tune left its folder");
}

#[test]
fn without_a_gpu_a_shape_the_landscape_did_not_record_is_refused_up_front() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("t");
    let out = evo(
        &[
            "tune",
            "--model",
            "llama-3-8b",
            "--strategy",
            "evolutionary",
            "--backend",
            LANDSCAPE,
            "--out",
            &out_dir.display().to_string(),
        ],
        &[],
    );
    refused(
        &out,
        "B1 H32/8 L2048 D128 f16 causal (1,32,2048,2048,128,f16,causal,kv=8): no CUDA device here",
    );
    refused(&out, "answers only B1 H8 L512 D64 f16");
    refused(&out, "needs a GPU");
    assert!(!out_dir.exists());
}

#[test]
fn a_replayed_tune_writes_plan_search_champions_and_table_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    let first = tune(&t, "24");
    let text = stdout(&first);
    assert!(first.status.success(), "{}\n{text}", stderr(&first));
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("replaying the landscape recorded on"),
        "{text}"
    );
    assert!(
        text.contains("[1/1] B1 H8 L512 D64 f16: 24 evaluations in"),
        "{text}"
    );
    assert!(
        text.contains("bench skipped: the numbers are replayed"),
        "{text}"
    );

    let plan = std::fs::read_to_string(t.join("tune.toml")).unwrap();
    assert!(plan.contains("strategy = \"evolutionary\""), "{plan}");
    assert!(plan.contains("spec = \"1,8,512,512,64,f16\""), "{plan}");
    assert!(plan.contains("evaluations = 24"), "{plan}");
    let search = t.join("searches/b1-h8-l512-d64-f16");
    for f in [
        "experiment.toml",
        "lineage.json",
        "report.md",
        "evaluations.jsonl",
    ] {
        assert!(search.join(f).is_file(), "no {f} in {}", search.display());
    }
    assert!(t.join("searches/b1-h8-l512-d64-f16.log").is_file());
    // The seeds: the dispatched champion first among the copied champions.
    assert!(t
        .join("searches/b1-h8-l512-d64-f16.seeds/b1-h8-l512-d64.toml")
        .is_file());
    let dispatch = std::fs::read_to_string(t.join("champions/dispatch.toml")).unwrap();
    assert!(dispatch.contains("name = \"b1-h8-l512-d64\""), "{dispatch}");
    let table = std::fs::read_to_string(t.join("tune.md")).unwrap();
    assert!(table.contains("Replayed"), "{table}");
    assert!(
        table.contains("| B1 H8 L512 D64 f16 | 24 | ")
            && table.contains("searches/b1-h8-l512-d64-f16 |"),
        "{table}"
    );
    assert!(text.contains(&table), "the printed table is tune.md's");

    // The same command again: the shape is skipped and no file changes.
    let before = files(&t);
    let again = tune(&t, "24");
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("[1/1] B1 H8 L512 D64 f16: searched before (24 evaluations"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        files(&t),
        before,
        "a rerun of a finished tune changed a file"
    );

    // A search cut short (no report yet) is resumed from its own folder.
    std::fs::remove_file(search.join("report.md")).unwrap();
    let resumed = tune(&t, "24");
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(stdout(&resumed).contains("[1/1] B1 H8 L512 D64 f16: 24 evaluations in"));
    let log = std::fs::read_to_string(t.join("searches/b1-h8-l512-d64-f16.log")).unwrap();
    assert!(
        log.contains("24 evaluations: 0 fresh, 24 from the cache"),
        "{log}"
    );

    // Another budget on the same folder is refused, naming the field and the fix.
    let more = tune(&t, "30");
    refused(&more, "tune.toml: records budget.evaluations = 24 per shape, but budget.evaluations = 30 was given");
    refused(&more, "use a new --out folder");
    assert_eq!(
        std::fs::read_to_string(t.join("tune.toml")).unwrap(),
        plan,
        "the refused run changed the plan"
    );
}

#[test]
fn a_folder_that_is_not_a_tune_is_not_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    std::fs::create_dir(&t).unwrap();
    std::fs::write(t.join("evaluations.jsonl"), "{\"kept\": true}\n").unwrap();
    refused(
        &tune(&t, "24"),
        "holds evaluations.jsonl but no tune.toml: it is not a tune evo can resume",
    );
    assert_eq!(std::fs::read_dir(&t).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(t.join("evaluations.jsonl")).unwrap(),
        "{\"kept\": true}\n"
    );
}

#[test]
fn the_default_strategy_is_the_guided_one_with_its_cost_model() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    let out = evo(
        &[
            "tune",
            "--problem",
            "1,8,512,512,64,f16",
            "--budget",
            "16",
            "--backend",
            LANDSCAPE,
            "--out",
            &t.display().to_string(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_to_string(t.join("tune.toml"))
        .unwrap()
        .contains("strategy = \"guided\""));
    // The search ran guided, its model trained on the repository's records.
    let search = t.join("searches/b1-h8-l512-d64-f16");
    let experiment = std::fs::read_to_string(search.join("experiment.toml")).unwrap();
    assert!(experiment.contains("strategy = \"guided\""), "{experiment}");
    assert!(
        experiment.contains("model_data = \"experiments\""),
        "{experiment}"
    );
    let report = std::fs::read_to_string(search.join("report.md")).unwrap();
    assert!(report.contains("## Cost model"), "{report}");
}

#[test]
fn a_seeded_tune_runs_the_same_searches_again() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str| {
        let t = tmp.path().join(name);
        let out = evo(
            &[
                "tune",
                "--problem",
                "1,8,512,512,64,f16",
                "--budget",
                "12",
                "--seed",
                "5",
                "--strategy",
                "evolutionary",
                "--backend",
                LANDSCAPE,
                "--out",
                &t.display().to_string(),
            ],
            &[],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        t
    };
    let (a, b) = (run("a"), run("b"));
    assert!(std::fs::read_to_string(a.join("tune.toml"))
        .unwrap()
        .contains("seed = 5"));
    let search = |t: &Path, file: &str| {
        std::fs::read_to_string(t.join("searches/b1-h8-l512-d64-f16").join(file)).unwrap()
    };
    // The search's seed is drawn from the tune's and the shape: recorded, and the same
    // in both tunes, as is every evaluation in its order.
    let seed_line = |t: &Path| {
        search(t, "experiment.toml")
            .lines()
            .find(|l| l.starts_with("seed = "))
            .map(str::to_string)
            .expect("experiment.toml records its seed")
    };
    assert_eq!(seed_line(&a), seed_line(&b));
    assert_ne!(seed_line(&a), "seed = 5");
    // Each record but its time of writing.
    let evaluations = |t: &Path| -> Vec<String> {
        search(t, "evaluations.jsonl")
            .lines()
            .map(|l| l.split(",\"recorded_unix\"").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(evaluations(&a).len(), 12);
    assert_eq!(evaluations(&a), evaluations(&b));
    // A resume that names another seed is refused, naming the field.
    let other = evo(
        &["tune", "--seed", "6", "--out", &a.display().to_string()],
        &[],
    );
    refused(&other, "records seed = 5, but 6 was given");
}

#[test]
fn a_search_where_nothing_passed_is_named_and_the_tune_says_how_to_go_on() {
    // The recorded landscape with every measured genome turned into a worker timeout:
    // the search runs its budget and crowns nothing.
    let tmp = tempfile::tempdir().unwrap();
    let landscape = tmp.path().join("landscape");
    std::fs::create_dir(&landscape).unwrap();
    let recorded = Path::new("experiments/2026-11-23-h100-landscape");
    std::fs::copy(
        recorded.join("landscape.toml"),
        landscape.join("landscape.toml"),
    )
    .unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(
            std::fs::File::open(recorded.join("evaluations.jsonl.gz")).unwrap(),
        ),
        &mut text,
    )
    .unwrap();
    let mut timed_out = String::new();
    for line in text.lines() {
        let mut e: serde_json::Value = serde_json::from_str(line).unwrap();
        if e["status"] == "ok" {
            e["status"] = "timeout".into();
            e["score_us"] = serde_json::Value::Null;
            e["timings"] = serde_json::json!([]);
            e["detail"] = "no answer within 60 s".into();
        }
        timed_out += &format!("{e}\n");
    }
    std::fs::write(landscape.join("evaluations.jsonl"), timed_out).unwrap();

    let t = tmp.path().join("t");
    let out = tune_on(&t, "8", &format!("replay:{}", landscape.display()));
    let text = stdout(&out);
    assert!(
        text.contains("[1/1] B1 H8 L512 D64 f16: 8 evaluations in")
            && text.contains("no candidate passed the gates"),
        "{text}"
    );
    refused(
        &out,
        "searches/b1-h8-l512-d64-f16: no candidate passed the gates",
    );
    refused(
        &out,
        "give that search more time with `evo evolve --experiment",
    );
    // No champions step ran for a search with nothing to crown; the table says why.
    assert!(!t.join("champions").exists());
    let table = std::fs::read_to_string(t.join("tune.md")).unwrap();
    assert!(
        table.contains("| B1 H8 L512 D64 f16 | 8 | no candidate passed the gates: see searches/b1-h8-l512-d64-f16.log |"),
        "{table}"
    );
}
