//! Tests that need an NVIDIA GPU and NVRTC: `cargo test -p evo-gates --features gpu
//! -- --test-threads=1` (one at a time, so timings do not share the GPU).
//!
//! The adversarial kernels of tests/kernels/ must each get the verdicts written in
//! their `.expected.toml` (GREEN over the default suite and the shapes drawn from the
//! seed; FAST with its verification where the file names a FAST verdict); the naive
//! kernel, the cuBLAS hybrid and the named genomes must pass GREEN.

use crate::compile::{
    compile_all, cublas_hybrid, gate_device, load_family, variants_for, KernelSource,
};
use crate::device::Device;
use crate::error::GateError;
use crate::fast::{time_problem, Fast, FastOptions};
use crate::green::{judge, run_green, GreenOptions, GreenReport};
use crate::inputs::Inputs;
use crate::kernel::AttentionKernel;
use crate::lse_twin::{compile_lse_twins, load_lse_twins};
use crate::reference::reference_at;
use crate::suite::{full_cases, Case, GreenSuite};
pub(crate) use crate::verdicts::{hand_written, verdict_mismatch, Expected};
use evo_codegen::{compile_source, CompileOptions, Toolchain};
use evo_genome::{GenomeFile, Pass, Problem, Target};
use std::path::{Path, PathBuf};

/// The repository root: `EVO_REPO`, else the checkout this binary was built in (a
/// test binary carried to the GPU machine runs from another path).
pub(crate) fn repo() -> PathBuf {
    std::env::var_os("EVO_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

pub(crate) fn setup() -> (Device, Toolchain, Target) {
    let tc = Toolchain::discover().unwrap_or_else(|e| panic!("{e}"));
    let device = gate_device(&tc, 0).unwrap_or_else(|e| panic!("{e}"));
    let target = device.target().unwrap_or_else(|| {
        panic!(
            "{} (compute capability {:?}) is not a known target",
            device.name(),
            device.compute_capability()
        )
    });
    (device, tc, target)
}

pub(crate) const GREEN_SEED: u64 = 2026;

/// FAST with its verification on the seed shape (a fresh nonce, as every real run).
fn fast_on_seed_shape(kernel: &mut dyn AttentionKernel) -> Fast {
    time_problem(kernel, &Problem::seed(), &FastOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", kernel.name()))
}

fn green_over_default(
    device: &Device,
    tc: &Toolchain,
    target: Target,
    sources: &[KernelSource],
    cases: &[Case],
) -> Vec<GreenReport> {
    let problems: Vec<Problem> = cases.iter().map(|c| c.problem).collect();
    let built = compile_all(tc, sources, &variants_for(&problems), target);
    // As `evo gate`: each genome's lse twins beside it, for GREEN's lse launch.
    let twins = compile_lse_twins(tc, sources, &variants_for(&problems), target);
    sources
        .iter()
        .zip(&built)
        .zip(&twins)
        .map(|((source, variants), twins)| {
            // A head dim the source cannot be built at (a genome's rules, a first-ABI
            // file at D96/D256) is skipped, as `evo gate` skips it; any other variant
            // must compile.
            for v in variants {
                if let Err(e) = &v.result {
                    assert!(
                        source.unsupported(v.head_dim, target).is_some(),
                        "{} D{} {} did not compile: {e}",
                        source.name(),
                        v.head_dim,
                        v.dtype
                    );
                }
            }
            let stated: Vec<Case> = cases
                .iter()
                .filter(|c| source.unsupported(c.problem.head_dim, target).is_none())
                .cloned()
                .collect();
            let mut family =
                load_family(device, source.name(), variants).unwrap_or_else(|e| panic!("{e}"));
            load_lse_twins(device, &mut family, twins).unwrap_or_else(|e| panic!("{e}"));
            run_green(
                &mut family,
                &stated,
                GreenOptions {
                    seed: GREEN_SEED,
                    stop_at_first_failure: false,
                },
            )
            .unwrap_or_else(|e| panic!("{}: {e}", source.name()))
        })
        .collect()
}

#[test]
fn hand_written_kernels_get_their_expected_verdicts() {
    let (device, tc, target) = setup();
    // The backward modules (bwd_*.cu) have a test of their own, below.
    let (files, sources) = hand_written(Pass::Forward, |p| {
        format!("tests/kernels/{}", p.file_name().unwrap().to_string_lossy())
    });
    assert!(
        files.len() >= 15,
        "expected the naive kernel and fourteen adversarial ones in tests/kernels"
    );
    // A seed of this run's own, as `evo gate` draws one: fixed_draw_only.cu is right on
    // the shapes GREEN_SEED draws.
    let seed: u64 = rand::random::<u64>() >> 11;
    eprintln!("GREEN seed {seed}");
    let reports = green_over_default(
        &device,
        &tc,
        target,
        &sources,
        &full_cases(GreenSuite::Default.cases(), seed),
    );
    let seed_variants = variants_for(&[Problem::seed()]);
    let fast_of = |source: &KernelSource| -> Fast {
        let built = compile_all(&tc, std::slice::from_ref(source), &seed_variants, target);
        let mut family =
            load_family(&device, source.name(), &built[0]).unwrap_or_else(|e| panic!("{e}"));
        fast_on_seed_shape(&mut family)
    };
    // The median of a twin (naive.cu, or the kernel an .expected.toml names), timed once.
    let mut twins: std::collections::HashMap<String, f64> = Default::default();
    let mut twin_us = |name: &str| -> f64 {
        *twins.entry(name.to_string()).or_insert_with(|| {
            let twin = sources
                .iter()
                .find(|s| s.name().ends_with(&format!("/{name}.cu")))
                .unwrap_or_else(|| panic!("tests/kernels/{name}.cu"));
            fast_of(twin).timing.median_us
        })
    };
    let mut wrong = Vec::new();
    for ((file, source), report) in files.iter().zip(&sources).zip(&reports) {
        let expected: Expected =
            toml::from_str(&std::fs::read_to_string(file.with_extension("expected.toml")).unwrap())
                .unwrap();
        let verdict = if report.passed() { "pass" } else { "fail" };
        let mut failures = report.failures();
        let mut got = verdict.to_string();
        let mut want = expected.verdict.clone();
        if let Some(fast_expected) = &expected.fast {
            want += &format!(", FAST {fast_expected}");
            if report.passed() {
                let fast = fast_of(source);
                let fast_verdict = if fast.failure().is_none() {
                    "pass"
                } else {
                    "fail"
                };
                got += &format!(", FAST {fast_verdict}");
                failures = fast.failure().unwrap_or_default();
                let bound = match (&expected.twin, expected.min_time_vs_twin) {
                    (Some(twin), Some(min)) => Some((twin.clone(), min)),
                    _ => expected
                        .min_time_vs_naive
                        .map(|min| ("naive".to_string(), min)),
                };
                eprintln!("{}: FAST {:.2} µs", file.display(), fast.timing.median_us);
                if let Some((twin, min)) = bound {
                    let ratio = fast.timing.median_us / twin_us(&twin);
                    eprintln!("  {ratio:.2}x {twin}.cu's time");
                    if ratio < min {
                        got += &format!(" at {ratio:.2}x {twin}.cu's time (under {min})");
                    }
                }
            }
        }
        let label = file.display().to_string();
        if let Some(w) = verdict_mismatch(&label, &got, &want, &expected, &failures) {
            wrong.push(w);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The genome files of the repository's folders `dirs` whose genomes are of `pass`, as
/// kernel sources, in the order of their paths.
pub(crate) fn genome_sources(dirs: &[&str], pass: Pass) -> Vec<KernelSource> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    paths
        .iter()
        .map(|p| GenomeFile::load(p).unwrap())
        .filter(|f| f.genes.pass() == pass)
        .map(|f| KernelSource::Genome {
            name: f.name,
            genome: f.genes,
        })
        .collect()
}

#[test]
fn named_genomes_pass_green() {
    let (device, tc, target) = setup();
    // The backward genomes' GREEN is the backward's (backward::gpu_tests).
    let sources = genome_sources(&["genomes"], Pass::Forward);
    let failed: Vec<String> = green_over_default(
        &device,
        &tc,
        target,
        &sources,
        &full_cases(GreenSuite::Default.cases(), GREEN_SEED),
    )
    .iter()
    .filter(|r| !r.passed())
    .map(|r| format!("{}:\n{}", r.kernel, r.failures()))
    .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn cublas_hybrid_passes_green_and_is_timed() {
    let (device, tc, target) = setup();
    let mut hybrid = cublas_hybrid(&tc, &device, target).unwrap_or_else(|e| panic!("{e}"));
    let report = run_green(
        &mut hybrid,
        &full_cases(GreenSuite::Default.cases(), 7),
        GreenOptions {
            seed: 7,
            stop_at_first_failure: false,
        },
    )
    .unwrap();
    assert!(report.passed(), "{}", report.failures());
    let fast = fast_on_seed_shape(&mut hybrid);
    assert_eq!(fast.failure(), None);
    let t = fast.timing;
    eprintln!(
        "cublas-hybrid {}: {:.2} µs ({}), {:.1} TFLOP/s",
        t.problem, t.median_us, t.method, t.tflops
    );
    assert!(t.min_us <= t.median_us && t.median_us <= t.max_us && t.median_us > 1.0);
}

#[test]
fn a_kernel_without_the_geometry_symbol_is_an_abi_error_naming_it() {
    let (device, tc, target) = setup();
    let src = "extern \"C\" __global__ void evo_attention_fwd() {}";
    let c = compile_source(
        &tc,
        "no_geometry.cu",
        src,
        &crate::compile::abi_defines(evo_genome::HeadDim::D64, evo_genome::Dtype::F16),
        &CompileOptions::new(target),
    )
    .unwrap();
    match device.load_attention("no_geometry.cu", &c.cubin) {
        Err(GateError::Abi(msg)) => assert!(msg.contains("evo_geometry"), "{msg}"),
        Err(other) => panic!("expected an ABI error, got {other}"),
        Ok(_) => panic!("a module without evo_geometry loaded"),
    }
}

#[test]
fn the_naive_kernel_is_timed_over_rotating_inputs() {
    let (device, tc, target) = setup();
    let source = KernelSource::File {
        path: "tests/kernels/naive.cu".into(),
        text: std::fs::read_to_string(repo().join("tests/kernels/naive.cu")).unwrap(),
    };
    let p = Problem::seed();
    let built = compile_all(
        &tc,
        std::slice::from_ref(&source),
        &variants_for(&[p]),
        target,
    );
    let mut family = load_family(&device, "naive", &built[0]).unwrap();
    let fast = fast_on_seed_shape(&mut family);
    assert_eq!(fast.failure(), None);
    let t = fast.timing;
    eprintln!(
        "naive {}: {:.2} µs ({} x{}), {:.2} TFLOP/s",
        p, t.median_us, t.method, t.launches_per_repeat, t.tflops
    );
    assert!(t.min_us <= t.median_us && t.median_us <= t.max_us);
    assert_eq!(
        t.launches_per_repeat as usize,
        crate::fast::input_sets(&p),
        "each input set launched once per repeat"
    );
    assert_eq!(family.prepared(), Some(p));
}

/// FAST's buffers pass from one kernel to the next only when the first one's timed
/// outputs were verified, and a kernel timed on kept buffers is still caught: the
/// cheats that FAST's verification exists for fail on them as on fresh ones.
#[test]
fn kept_timing_buffers_pass_on_only_after_verification() {
    let (device, tc, target) = setup();
    let seed_variants = variants_for(&[Problem::seed()]);
    let fast_of = |file: &str| -> Fast {
        let source = KernelSource::File {
            path: file.into(),
            text: std::fs::read_to_string(repo().join(file)).unwrap(),
        };
        let built = compile_all(&tc, std::slice::from_ref(&source), &seed_variants, target);
        let mut family = load_family(&device, file, &built[0]).unwrap_or_else(|e| panic!("{e}"));
        fast_on_seed_shape(&mut family)
    };
    assert!(!device.has_spare_buffers());
    let first = fast_of("tests/kernels/naive.cu");
    assert_eq!(first.failure(), None);
    assert!(
        device.has_spare_buffers(),
        "a verified kernel's buffers are kept"
    );
    let again = fast_of("tests/kernels/naive.cu");
    assert_eq!(again.failure(), None, "a kernel timed on kept buffers");
    let ratio = again.timing.median_us / first.timing.median_us;
    assert!(
        (0.8..1.25).contains(&ratio),
        "the same kernel on kept buffers: {:.2} µs, on fresh ones {:.2} µs",
        again.timing.median_us,
        first.timing.median_us
    );
    for cheat in [
        "tests/kernels/memo_pointer.cu",
        "tests/kernels/every_kth.cu",
    ] {
        assert!(device.has_spare_buffers());
        let fast = fast_of(cheat);
        let failure = fast.failure().unwrap_or_default();
        assert!(
            failure.contains("FAST verification"),
            "{cheat}: {failure:?}"
        );
        assert!(
            !device.has_spare_buffers(),
            "{cheat} failed verification; its buffers must not be handed on"
        );
        assert_eq!(fast_of("tests/kernels/naive.cu").failure(), None);
    }
    device.drop_spare_buffers();
    assert!(!device.has_spare_buffers());
}

/// The evolved champion's GREEN report on the default suite at a fixed seed, as a
/// snapshot: verdicts, rows checked and the errors to two significant digits (no
/// timing is part of GREEN). A template change that moves the champion's numerics
/// shows up in review. Run on the GPU with `INSTA_WORKSPACE_ROOT` set to the checkout.
/// The GREEN report of a genome file on the default suite at a fixed seed, as text.
fn green_report_text(device: &Device, tc: &Toolchain, target: Target, path: &str) -> String {
    let file = GenomeFile::load(&repo().join(path)).unwrap();
    let source = KernelSource::Genome {
        name: file.name,
        genome: file.genes,
    };
    let report =
        green_over_default(device, tc, target, &[source], &GreenSuite::Default.cases()).remove(0);
    let mut text = format!("{} (seed {})\n", report.kernel, report.seed);
    for case in &report.cases {
        for (n, l) in case.launches.iter().enumerate() {
            text += &format!(
                "{:<40} launch {} {:<4} rows {:>5}  rel {:.1e}  max abs {:.1e}  unwritten {}  nonfinite {}\n",
                case.case,
                n + 1,
                if l.failure.is_none() { "pass" } else { "FAIL" },
                l.rows_checked,
                l.rel_frob,
                l.max_abs,
                l.unwritten,
                l.nonfinite
            );
        }
    }
    assert!(report.passed(), "{path}: {}", report.failures());
    // A genome's lse twin is loaded beside it: every case also checked the forward's lse
    // on the twin (that launch is not in the snapshot, which stays the O launches').
    if let Some(c) = report.cases.iter().find(|c| c.lse.is_none()) {
        panic!("{path}: no lse check on {}", c.case);
    }
    text
}

#[test]
fn champion_green_report_snapshot() {
    let (device, tc, target) = setup();
    let text = green_report_text(&device, &tc, target, "genomes/champion-h100-seed.toml");
    insta::assert_snapshot!(text);
}

/// Each per-shape champion's GREEN report (genomes/champions/h100/*.toml), as for the
/// seed champion: one snapshot per champion, named by its class.
#[test]
fn per_shape_champion_green_report_snapshots() {
    let (device, tc, target) = setup();
    let dir = repo().join("genomes/champions/h100");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && !p.ends_with("dispatch.toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no champions in {}", dir.display());
    for path in files {
        let class = path.file_stem().unwrap().to_string_lossy().to_string();
        let rel = format!("genomes/champions/h100/{class}.toml");
        let text = green_report_text(&device, &tc, target, &rel);
        insta::assert_snapshot!(format!("champion_green_{}", class.replace('-', "_")), text);
    }
}

/// The device draws the same bits as `Inputs::random` on the host, for both dtypes, an
/// odd element count and a large-logit gain.
#[test]
fn the_device_draws_the_hosts_inputs_bit_for_bit() {
    let (device, _, _) = setup();
    for (p, gain) in [
        (Problem::seed(), 1.0f32),
        (
            "1,3,77,1001,128,bf16,causal".parse::<Problem>().unwrap(),
            40.0,
        ),
    ] {
        let seed = 0x5eed_0000_1234;
        let host = Inputs::random(&p, seed, gain);
        let on_device = device
            .draw_inputs(&p, seed, gain)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(host.q, on_device.q, "{p}: Q");
        assert_eq!(host.k, on_device.k, "{p}: K");
        assert_eq!(host.v, on_device.v, "{p}: V");
    }
}

/// The device's fp32 reference agrees with candle's on every row of shapes of both head
/// dims, both dtypes, causal and not, far inside the cross-check's limit.
#[test]
fn the_device_reference_agrees_with_candle_on_every_row() {
    let (device, _, _) = setup();
    for spec in [
        "1,2,333,1000,64,f16",
        "2,1,1000,77,128,bf16,causal",
        "1,1,1,4097,64,f16",
        "2,8,77,1000,64,f16,causal=br,kv=2",
        "1,3,300,77,128,bf16,causal=br,window=10:",
        "2,4,1,5000,64,f16,kv=1,window=100:20,align=br",
    ] {
        let p: Problem = spec.parse().unwrap();
        let inputs = Inputs::random(&p, 99, 1.0);
        let cpu = reference_at(&inputs, |_| (0..p.q_len).collect()).unwrap();
        let on_device = device
            .reference_of(&inputs)
            .unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<f32> = cpu
            .heads
            .iter()
            .flat_map(|h| h.out.iter().copied())
            .collect();
        let worst = on_device
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        eprintln!("{p}: worst |device - candle| {worst:.2e}");
        assert!(worst < 1e-5, "{p}: {worst}");
    }
}

/// GREEN's every-row device check of a large case says what the CPU's full check says
/// (same rows, same sums but for their order), and both say what the kernel is: the
/// naive kernel passes, and sparse_rows.cu (off on one row in 8192 of a large problem)
/// is caught, by each check and by GREEN itself, with its .expected.toml's reason and
/// its worst row on one of the defective rows.
#[test]
fn the_device_row_check_agrees_with_the_cpus() {
    let (device, tc, target) = setup();
    let p: Problem = "3,5,1000,1000,128,bf16".parse().unwrap();
    for file in ["tests/kernels/naive.cu", "tests/kernels/sparse_rows.cu"] {
        let source = KernelSource::File {
            path: file.into(),
            text: std::fs::read_to_string(repo().join(file)).unwrap(),
        };
        let expected: Expected = toml::from_str(
            &std::fs::read_to_string(repo().join(file).with_extension("expected.toml")).unwrap(),
        )
        .unwrap();
        let built = compile_all(
            &tc,
            std::slice::from_ref(&source),
            &variants_for(&[p]),
            target,
        );
        let mut family = load_family(&device, file, &built[0]).unwrap();
        let inputs = Inputs::random(&p, 5, 1.0);
        let out = family.run_once(&inputs).unwrap();
        let full = reference_at(&inputs, |_| (0..p.q_len).collect()).unwrap();
        let cpu = judge(&inputs, &out, &full);
        let rows = crate::verify::reference_row_indices(&p, &full);
        let found = family
            .check_last_run(&inputs, &rows[..64])
            .unwrap()
            .unwrap();
        let on_device = crate::verify::verdict(&p, 5, &found.stats, &found.findings, 0.0);
        eprintln!(
            "{file}: CPU rel {:.3e} max {:.3e} | device rel {:.3e} max {:.3e}",
            cpu.rel_frob, cpu.max_abs, on_device.rel_frob, on_device.max_abs
        );
        assert_eq!(cpu.rows_checked, on_device.rows_checked);
        assert!((cpu.rel_frob - on_device.rel_frob).abs() <= 1e-3 * cpu.rel_frob.max(1e-9));
        assert!((cpu.max_abs - on_device.max_abs).abs() <= 1e-5);
        assert_eq!(
            cpu.worst.map(|w| (w.b, w.h, w.row)),
            on_device.worst.map(|w| (w.b, w.h, w.row))
        );
        assert_eq!(found.findings.inputs_changed, Some(0));
        // What each check says of the kernel, not only that they agree.
        let green = run_green(
            &mut family,
            &[Case {
                problem: p,
                q_gain: 1.0,
                drawn: false,
            }],
            GreenOptions {
                seed: GREEN_SEED,
                stop_at_first_failure: false,
            },
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        if expected.verdict == "pass" {
            assert_eq!(cpu.failure, None, "{file}: the CPU check");
            assert_eq!(on_device.failure, None, "{file}: the device check");
            assert!(green.passed(), "{file}: {}", green.failures());
            continue;
        }
        let reason = expected
            .reason_contains
            .as_deref()
            .expect("a failing kernel's .expected.toml names its reason");
        for (check, failure) in [
            ("the CPU check", cpu.failure.as_deref()),
            ("the device check", on_device.failure.as_deref()),
        ] {
            assert!(
                failure.is_some_and(|f| f.contains(reason)),
                "{file}: {check} must fail with {reason:?}: {failure:?}"
            );
        }
        assert!(
            !green.passed() && green.failures().contains(reason),
            "{file}: GREEN must reject it with {reason:?}: {}",
            green.failures()
        );
        // The worst element sits on a row the kernel gets wrong: (b·H + h)·Lq + row is
        // 8191 mod 8192 (sparse_rows.cu's defect).
        let worst = on_device
            .worst
            .expect("a failing check names its worst element");
        let global = (worst.b * p.heads + worst.h) * p.q_len + worst.row;
        assert_eq!(global % 8192, 8191, "{file}: worst at {worst}");
    }
}
