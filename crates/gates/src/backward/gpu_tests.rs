//! The backward's GPU tests (opt-in: `--features gpu`): the hand-written backward
//! modules of tests/kernels get their expected verdicts, and the named backward genomes
//! and the champions' backward genomes pass GREEN.

use super::fast::time_backward;
use super::green::{run_backward_green, BackwardReferences, BackwardVariants};
use crate::compile::{compile_all, variants_for, BuiltVariant, KernelSource};
use crate::device::Device;
use crate::gpu_tests::{
    genome_sources, hand_written, setup, verdict_mismatch, Expected, GREEN_SEED,
};
use crate::suite::{full_cases, GreenSuite};
use evo_genome::{HeadDim, Pass, Problem, Target};

/// A source's compiled variants, loaded as `evo gate` loads them: a head dim the source
/// cannot be built at (a genome's rules) is left out, and any other variant must compile.
fn load_variants(
    device: &Device,
    source: &KernelSource,
    built: &[BuiltVariant],
    target: Target,
) -> BackwardVariants {
    let name = source.name();
    let variants = built
        .iter()
        .filter(|v| source.unsupported(v.head_dim, target).is_none())
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
        .collect();
    BackwardVariants {
        name: name.to_string(),
        variants,
    }
}

/// The backward genomes of genomes/ (fa2-bwd, fa3-bwd, fa3-bwd-d256) and of
/// genomes/champions/h100/backward/ pass GREEN (backward) over the default suite and
/// the shapes drawn from the fixed seed, at every head dim their rules admit; every
/// head dim has at least one of them.
#[test]
fn named_and_champion_backward_genomes_pass_green() {
    let (device, tc, target) = setup();
    let sources = genome_sources(
        &["genomes", "genomes/champions/h100/backward"],
        Pass::Backward,
    );
    assert!(
        sources.len() >= 7,
        "fa2-bwd, fa3-bwd, fa3-bwd-d256 and four champions"
    );
    let cases = full_cases(GreenSuite::Default.cases(), GREEN_SEED);
    let problems: Vec<Problem> = cases.iter().map(|c| c.problem).collect();
    let built = compile_all(&tc, &sources, &variants_for(&problems), target);
    let mut references = BackwardReferences::default();
    let mut failed = Vec::new();
    let mut covered: Vec<HeadDim> = Vec::new();
    for (source, built) in sources.iter().zip(&built) {
        let mut kernel = load_variants(&device, source, built, target);
        covered.extend(kernel.variants.iter().map(|((d, _), _)| *d));
        let reports = run_backward_green(&mut kernel, &cases, GREEN_SEED, false, &mut references)
            .unwrap_or_else(|e| panic!("{}: {e}", source.name()));
        for r in &reports {
            for f in &r.failures {
                failed.push(format!("{}: {}: {f}", source.name(), r.case));
            }
        }
    }
    for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128, HeadDim::D256] {
        assert!(covered.contains(&d), "no backward genome ran at D{d}");
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

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
        let mut kernel = load_variants(&device, source, built, target);
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
