//! The evaluation cache on the CPU: a second run reuses it, a cut-short last line is
//! resumed, a damaged middle line or another device's records are refused, failures are
//! kept with their kind.

use super::*;

#[test]
fn second_run_reuses_the_cache_and_gives_the_same_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let space = SearchSpace::full(HeadDim::D64, Target::Sm90);
    let run = |evaluator: &mut FakeEvaluator| {
        let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
        let out = search(
            &config(StrategyKind::Evolutionary, Budget::Evaluations(40), 8),
            &space,
            evaluator,
            Sinks {
                cache: Some(&mut cache),
                ..Sinks::default()
            },
            &WallClock::start(),
        )
        .unwrap();
        (out, cache.report.reusable)
    };
    let mut first = FakeEvaluator::new();
    let (one, loaded) = run(&mut first);
    assert_eq!((first.evaluated, one.cache_hits, loaded), (40, 0, 0));
    let mut second = FakeEvaluator::new();
    let (two, loaded) = run(&mut second);
    assert_eq!((second.evaluated, two.cache_hits, loaded), (0, 40, 40));
    assert_eq!(one.lineage.to_json(), two.lineage.to_json());
    // A larger budget reuses the 40 and evaluates only the rest.
    let mut third = FakeEvaluator::new();
    let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    let out = search(
        &config(StrategyKind::Evolutionary, Budget::Evaluations(60), 8),
        &space,
        &mut third,
        Sinks {
            cache: Some(&mut cache),
            ..Sinks::default()
        },
        &WallClock::start(),
    )
    .unwrap();
    assert_eq!((third.evaluated, out.cache_hits), (20, 40));
}

pub(super) fn some_evaluations(n: usize) -> Vec<Evaluation> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let space = SearchSpace::full(HeadDim::D64, Target::Sm90);
    (0..n)
        .map(|_| {
            fixture::synthetic_evaluation(
                &space.sample_valid(&mut rng).unwrap(),
                HeadDim::D64,
                Target::Sm90,
            )
        })
        .collect()
}

#[test]
fn cache_resumes_after_a_cut_short_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let evals = some_evaluations(5);
    {
        let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
        for e in &evals {
            cache.insert(e.clone()).unwrap();
        }
    }
    // kill -9 in the middle of writing the fifth record.
    let text = std::fs::read_to_string(&path).unwrap();
    let cut = text.len() - 40;
    std::fs::write(&path, &text[..cut]).unwrap();
    let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    assert_eq!(cache.len(), 4);
    assert_eq!(cache.report.warnings.len(), 1);
    assert!(
        cache.report.warnings[0].contains(":5: skipped a cut-short last line"),
        "{:?}",
        cache.report.warnings
    );
    cache.insert(evals[4].clone()).unwrap();
    drop(cache);
    let cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    assert_eq!(
        (cache.len(), cache.report.warnings.len()),
        (5, 0),
        "the resumed file is clean"
    );
    assert_eq!(cache.get(&evals[4].genome_id), Some(&evals[4]));

    // A record that lost only its newline is kept, and the next one starts a new line.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.trim_end()).unwrap();
    let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    assert_eq!(cache.len(), 5);
    let extra = some_evaluations(6).pop().unwrap();
    cache.insert(extra).unwrap();
    assert_eq!(
        EvaluationCache::open(&path, fixture::cache_scope())
            .unwrap()
            .len(),
        6
    );
}

#[test]
fn cache_refuses_a_damaged_middle_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    std::fs::write(&path, "{\"not\": \"a record\"}\n{}\n").unwrap();
    let err = EvaluationCache::open(&path, fixture::cache_scope())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("evaluations.jsonl:1: not a cache record"),
        "{err}"
    );
}

#[test]
fn cache_loads_records_of_an_older_schema() {
    // Written by hand as the first version wrote records: no `recorded_unix`, no
    // template hash or toolchain in the key, and an evaluation without the fields
    // added later (`timings`, `resources`, `detail`).
    let g = Genome::baseline();
    let old = format!(
        r#"{{"key":{{"genome_id":"{id}","objective":"B1 H8 L512 D64 f16","device":"{dev}"}},"evaluation":{{"genome_id":"{id}","genome":{genome},"device":"{dev}","status":"ok","score_us":12.5}}}}"#,
        id = g.id(),
        dev = fixture::DEVICE,
        genome = serde_json::to_string(&g).unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    std::fs::write(&path, format!("{old}\n")).unwrap();
    let old_scope = CacheScope {
        template_hash: String::new(),
        toolchain: String::new(),
        ..fixture::cache_scope()
    };
    let cache = EvaluationCache::open(&path, old_scope).unwrap();
    let e = cache.get(&g.id()).unwrap();
    assert_eq!(
        (e.status, e.score_us, e.timings.len(), e.detail.as_str()),
        (Status::Ok, Some(12.5), 0, "")
    );
    // Under today's scope (a known template and toolchain) it loads but is not reused.
    let cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    assert_eq!((cache.len(), cache.report.other_scope), (0, 1));
}

#[test]
fn cache_refuses_to_mix_devices() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    cache.insert(some_evaluations(1).pop().unwrap()).unwrap();
    drop(cache);
    let other = CacheScope {
        device: "NVIDIA L4".into(),
        ..fixture::cache_scope()
    };
    let err = EvaluationCache::open(&path, other).unwrap_err().to_string();
    assert!(
        err.contains(":1: this cache holds timings from `Synthetic GPU"),
        "{err}"
    );
    assert!(err.contains("measures on `NVIDIA L4`"), "{err}");
}

#[test]
fn failures_are_cached_with_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evaluations.jsonl");
    let mut cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    let g = Genome::baseline();
    cache
        .insert(Evaluation::failed(
            g,
            fixture::DEVICE,
            Status::Timeout,
            "no answer in 10 s",
        ))
        .unwrap();
    drop(cache);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"status\":\"timeout\""), "{text}");
    let cache = EvaluationCache::open(&path, fixture::cache_scope()).unwrap();
    assert_eq!(cache.get(&g.id()).unwrap().status, Status::Timeout);
}
