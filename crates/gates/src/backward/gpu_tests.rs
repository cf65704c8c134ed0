//! The backward's GPU tests (opt-in: `--features gpu`): the hand-written backward
//! modules of tests/kernels get their expected verdicts.

use super::fast::time_backward;
use super::green::{run_backward_green, BackwardReferences, BackwardVariants};
use crate::compile::{compile_all, variants_for};
use crate::gpu_tests::{hand_written, setup, verdict_mismatch, Expected};
use crate::suite::{full_cases, GreenSuite};
use evo_genome::{Pass, Problem};

/// The hand-written backward modules (tests/kernels/bwd_*.cu, which declare `evo_pass`)
/// get the verdicts of their `.expected.toml`, as `evo gate` gives them: GREEN (backward)
/// over the default suite and the shapes drawn from a fresh seed, then, where the file
/// names a FAST verdict, FAST (backward) on the seed shape with `evo gate`'s 8 sets and
/// 7 repeats.
#[test]
fn hand_written_backward_kernels_get_their_expected_verdicts() {
    let (device, tc, target) = setup();
    let (files, sources) = hand_written(Pass::Backward, |p| p.display().to_string());
    assert!(
        files.len() >= 8,
        "expected bwd_naive.cu and seven defective variants in tests/kernels"
    );
    let seed: u64 = rand::random::<u64>() >> 11;
    eprintln!("GREEN seed {seed}");
    let cases = full_cases(GreenSuite::Default.cases(), seed);
    let mut problems: Vec<Problem> = cases.iter().map(|c| c.problem).collect();
    problems.push(Problem::seed());
    let built = compile_all(&tc, &sources, &variants_for(&problems), target);
    let mut references = BackwardReferences::default();
    let mut wrong = Vec::new();
    for ((file, source), built) in files.iter().zip(&sources).zip(&built) {
        let expected: Expected =
            toml::from_str(&std::fs::read_to_string(file.with_extension("expected.toml")).unwrap())
                .unwrap();
        let name = source.name();
        let mut kernel = BackwardVariants {
            name: name.to_string(),
            variants: built
                .iter()
                .map(|v| {
                    let c = v.result.as_ref().unwrap_or_else(|e| {
                        panic!("{name} D{} {} did not compile: {e}", v.head_dim, v.dtype)
                    });
                    let label = format!("{name} (D{} {})", v.head_dim, v.dtype);
                    let loaded = device
                        .load_backward(&label, &c.cubin)
                        .unwrap_or_else(|e| panic!("{e}"));
                    ((v.head_dim, v.dtype), loaded)
                })
                .collect(),
        };
        let reports = run_backward_green(&mut kernel, &cases, seed, false, &mut references)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let green: Vec<String> = reports
            .iter()
            .flat_map(|r| r.failures.iter().map(move |f| format!("{}: {f}", r.case)))
            .collect();
        let mut got = if green.is_empty() { "pass" } else { "fail" }.to_string();
        let mut failures = green.join("\n");
        let mut want = expected.verdict.clone();
        if let Some(fast_expected) = &expected.fast {
            want += &format!(", FAST {fast_expected}");
            if green.is_empty() {
                let p = Problem::seed();
                let (_, k) = kernel
                    .variants
                    .iter_mut()
                    .find(|(key, _)| *key == (p.head_dim, p.dtype))
                    .expect("the seed shape's variant");
                match time_backward(k, &p, seed, 8, 7) {
                    Ok(t) => {
                        got += ", FAST pass";
                        eprintln!("{name}: FAST {:.2} µs", t.warm.median_us);
                    }
                    Err(e) => {
                        got += ", FAST fail";
                        failures = format!("FAST on {p}: {e}");
                    }
                }
            }
        }
        if let Some(w) = verdict_mismatch(name, &got, &want, &expected, &failures) {
            wrong.push(w);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
