//! Compiles through NVRTC (no GPU needed): the named genomes, a covering design of the
//! valid space (every allele of every gene on every target and head dimension, see
//! `covering`), named Hopper alleles, a hand-written kernel and a broken one. Needs the
//! toolchain that `.ci/run` installs (or `EVO_NVRTC_DIR`); without it every test here
//! fails with the install hint. The `nvrtc_sweep_` tests print a summary (count, time,
//! compiles/s, worst registers and spills); `just test` runs them with `--nocapture`.
//! They share one compile cache, so a kernel two sweeps name compiles once.

mod common;
mod covering;
mod ptx_expect;

use common::{fa3, toolchain};
use covering::Job;
use evo_codegen::*;
use evo_genome::{
    space, BlockN, ConsumerWgs, Dtype, Family, Genome, GenomeFile, HeadDim, HopperLoad, OStore,
    Overlap, ProducerRegs, RegCap, SplitKv, Stages, Switch, Target, WgSplit,
};
use ptx_expect::{lse_mismatches, ptx_mismatches};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

fn genome_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes")
}

/// The named forward genomes (the backward ones are tests/bwd_compile.rs's).
fn named_genomes() -> Vec<GenomeFile> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(genome_dir())
        .expect("genomes/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no genomes/*.toml");
    paths
        .iter()
        .map(|p| GenomeFile::load(p).unwrap_or_else(|e| panic!("{e}")))
        .filter(|f| f.genes.pass() == evo_genome::Pass::Forward)
        .collect()
}

fn genome_toml(name: &str, g: &Genome) -> String {
    GenomeFile {
        name: name.into(),
        description: String::new(),
        genes: *g,
    }
    .to_toml_string()
}

type Outcome = Arc<OnceLock<Result<Compiled, CodegenError>>>;

/// Compiles jobs in parallel (rayon), each kernel once per test process: the sweeps run
/// at the same time and overlap (fa3 is a named genome and the Hopper alleles' base, and
/// the covering design may pick any kernel), and a job another sweep is compiling is
/// waited for, not compiled again. Results in job order.
fn compile_shared(jobs: &[Job]) -> Vec<Outcome> {
    use rayon::prelude::*;
    static CACHE: OnceLock<Mutex<HashMap<Job, Outcome>>> = OnceLock::new();
    let cells: Vec<Outcome> = {
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        jobs.iter()
            .map(|&(g, d, dtype, target)| {
                // Genes that do not apply to the family change no define: one kernel.
                let key = (g.canonical(), d, dtype, target);
                cache.entry(key).or_default().clone()
            })
            .collect()
    };
    let tc = toolchain();
    jobs.par_iter()
        .zip(&cells)
        .for_each(|((g, d, dtype, target), cell)| {
            cell.get_or_init(|| compile_genome(tc, g, *d, *dtype, *target));
        });
    cells
}

/// Compiles jobs and checks each; returns failures and prints a summary.
fn sweep(label: &str, jobs: &[Job]) -> Vec<String> {
    let tc = toolchain();
    let start = Instant::now();
    let cells = compile_shared(jobs);
    let results: Vec<&Result<Compiled, CodegenError>> = cells
        .iter()
        .map(|c| c.get().expect("compile_shared fills every job"))
        .collect();
    let wall = start.elapsed().as_secs_f64();
    let mut failures = Vec::new();
    let mut worst_regs: Option<(u32, String)> = None;
    let mut spilling = 0;
    let mut worst_spill: Option<(u32, String)> = None;
    for ((g, d, dtype, target), result) in jobs.iter().zip(results) {
        let what = format!("{} D{d} {dtype} {target}", g.summary());
        match result {
            Err(e) => failures.push(format!(
                "{what}: {e}\n--- genome ---\n{}",
                genome_toml("failed", g)
            )),
            Ok(c) => {
                let head = format!("-DEVO_HEAD_DIM={d}");
                assert!(
                    c.options.contains(&head),
                    "compile_many returned results out of job order"
                );
                let problems = ptx_mismatches(g, c);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{what}: PTX does not match the genome:\n  {}\n--- genome ---\n{}",
                        problems.join("\n  "),
                        genome_toml("mismatch", g)
                    ));
                }
                if let Some(k) = c.report.kernel(ENTRY_FWD) {
                    if worst_regs.as_ref().is_none_or(|(r, _)| k.registers > *r) {
                        worst_regs = Some((k.registers, what.clone()));
                    }
                    let spill = k.spill_stores + k.spill_loads;
                    if spill > 0 {
                        spilling += 1;
                    }
                    if worst_spill.as_ref().is_none_or(|(s, _)| spill > *s) {
                        worst_spill = Some((spill, what.clone()));
                    }
                }
            }
        }
    }
    let (regs, regs_at) = worst_regs.unwrap_or_default();
    let (spill, spill_at) = worst_spill.unwrap_or_default();
    eprintln!(
        "[{label}] {} compiles in {wall:.1} s = {:.2} compiles/s on {} rayon threads ({}, template {}); \
         {} failed; most registers {regs} ({regs_at}); {spilling} spill, worst {spill} bytes ({spill_at})",
        jobs.len(),
        jobs.len() as f64 / wall,
        rayon::current_num_threads(),
        tc.label(),
        template_hash(),
        failures.len(),
    );
    failures
}

fn assert_no_failures(failures: Vec<String>) {
    if failures.is_empty() {
        return;
    }
    let shown: Vec<&String> = failures.iter().take(5).collect();
    panic!(
        "{} of the compiles failed; the first {}:\n\n{}",
        failures.len(),
        shown.len(),
        shown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

/// Every named genome on every target and head dim it is valid on, f16 and bf16 taking
/// turns with the head dim and swapping between the targets: an Ampere genome builds at
/// both dtypes at every head dim, a Hopper one at both over its head dims, in half the
/// compiles of both dtypes everywhere (the covering sweep pairs the dtypes with every
/// allele).
#[test]
fn nvrtc_sweep_named_genomes() {
    let mut jobs = Vec::new();
    for file in named_genomes() {
        for (t, target) in Target::ALL.into_iter().enumerate() {
            for (i, d) in HeadDim::ALL.into_iter().enumerate() {
                let dtype = Dtype::ALL[(i + t) % 2];
                if file.genes.is_valid(d, target) {
                    jobs.push((file.genes, d, dtype, target));
                } else if file.genes.family == Family::Hopper {
                    // D256's O accumulator and K/V tiles fit only smaller tiles
                    // than the named ones (FA3 uses 128 x 80 there).
                    assert!(
                        target == Target::Sm89 || d == HeadDim::D256,
                        "{} must be valid on sm_90 below D256",
                        file.name
                    );
                } else {
                    assert_ne!(
                        d,
                        HeadDim::D64,
                        "{} must be valid at D64 on {target}",
                        file.name
                    );
                }
            }
        }
    }
    assert_no_failures(sweep("named genomes", &jobs));
}

/// The lse twin of every named genome (EVO_LSE = 1; kernels/ABI.md, "The log-sum-exp
/// output") declares `evo_lse` and takes the `lse` pointer last in both entries, at D64
/// in f16 and D128 in bf16 on sm_90; the sweeps check that the plain builds have neither.
#[test]
fn lse_twins_of_the_named_genomes_declare_evo_lse_and_take_the_pointer() {
    let jobs: Vec<_> = named_genomes()
        .iter()
        .flat_map(|f| {
            [(HeadDim::D64, Dtype::F16), (HeadDim::D128, Dtype::Bf16)]
                .map(|(d, t)| (f.genes, d, t, Target::Sm90, Build::LseTwin))
        })
        .filter(|(g, d, _, target, _)| g.is_valid(*d, *target))
        .collect();
    assert!(jobs.len() >= 10, "{} twins", jobs.len());
    let mut failures = Vec::new();
    for ((g, d, dtype, _, _), result) in jobs.iter().zip(compile_builds(toolchain(), &jobs)) {
        let what = format!("{} D{d} {dtype}", g.summary());
        match result {
            Err(e) => failures.push(format!("{what}: {e}")),
            Ok(c) => {
                assert!(c.options.contains(&"-DEVO_LSE=1".to_string()), "{what}");
                for m in lse_mismatches(&c, Build::LseTwin) {
                    failures.push(format!("{what}: {m}"));
                }
            }
        }
    }
    assert_no_failures(failures);
}

/// The covering design (see `covering`): every allele of every gene, and every pair of
/// the switches that pick code paths, on every target and head dimension where some
/// valid genome has it. `EVO_SWEEP_SAMPLES=n` adds n genomes drawn uniformly from the
/// valid space (seed `EVO_SWEEP_SEED`), each compiled on every target it is valid on,
/// for a deeper look than CI's.
#[test]
fn nvrtc_sweep_covering_design() {
    let mut jobs = covering::jobs(&covering::cells());
    let samples: usize = env_number("EVO_SWEEP_SAMPLES", 0);
    let seed: u64 = env_number("EVO_SWEEP_SEED", 0x5eed);
    if samples > 0 {
        eprintln!("[covering] and {samples} sampled genomes, ChaCha8 seed {seed}");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for i in 0..samples {
        let space_of = Target::ALL[i % 2];
        let d = HeadDim::ALL[rng.random_range(0..HeadDim::ALL.len())];
        let dtype = Dtype::ALL[rng.random_range(0..2)];
        let g = space::sample_valid(&mut rng, d, space_of);
        for target in Target::ALL {
            if g.is_valid(d, target) {
                jobs.push((g, d, dtype, target));
            }
        }
    }
    assert_no_failures(sweep("covering", &jobs));
}

/// A whole number from the environment, `default` when unset; anything else stops the
/// sweep, rather than running a sweep other than the one asked for.
fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => default,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            panic!("{name} = {v:?} is not a whole number: give one (e.g. {name}=300) or unset it")
        }),
        Err(e) => panic!("{name}: {e}: give a whole number (e.g. {name}=300) or unset it"),
    }
}

/// Adds `g` for sm_90 at every head dim where it is valid, f16 and bf16 alternating with
/// the head dim (D64 f16, D96 bf16, D128 f16, D256 bf16).
fn at_every_fitting_head_dim(jobs: &mut Vec<Job>, g: evo_genome::Genome) {
    for d in HeadDim::ALL {
        let dtype = Dtype::ALL[d.get() as usize / 32 % 2];
        if g.is_valid(d, Target::Sm90) {
            jobs.push((g, d, dtype, Target::Sm90));
        }
    }
}

/// Every allele of every Hopper gene, each on the fa3 genome (the one gene changed), and
/// the combinations some genes need (chained overlap, the cluster merge, O's stores, the
/// keys split) at every head dim that fits. A single-gene neighbour compiles at one head
/// dim, turning with the allele: the covering sweep already reaches every allele at
/// every head dim, so what this adds is the allele in fa3's own context.
#[test]
fn nvrtc_sweep_hopper_alleles() {
    let fa3 = GenomeFile {
        name: "fa3".into(),
        description: String::new(),
        genes: fa3(),
    };
    let mut jobs = Vec::new();
    for (i, gene) in fa3.genes.genes().into_iter().enumerate() {
        for allele in 0..gene.allele_count() {
            let g = fa3.genes.with_allele(gene, allele);
            // The family gene also names the backward families, whose modules have no
            // forward entry (their sweeps are tests/bwd_compile.rs).
            if g.pass() != fa3.genes.pass() {
                continue;
            }
            let fits: Vec<HeadDim> = HeadDim::ALL
                .into_iter()
                .filter(|d| g.is_valid(*d, Target::Sm90))
                .collect();
            let Some(&d) = fits.get((i + allele) % fits.len().max(1)) else {
                continue;
            };
            let job = (g, d, Dtype::ALL[allele % 2], Target::Sm90);
            if !jobs.contains(&job) {
                jobs.push(job);
            }
        }
    }
    // `softmax_overlap = "chained"` needs a persistent grid, which fa3 has not: named on
    // fa3 with `persistent` on, at every head dim that fits.
    let chained = evo_genome::Genome {
        persistent: evo_genome::Switch::On,
        softmax_overlap: evo_genome::Overlap::Chained,
        ..fa3.genes
    };
    at_every_fitting_head_dim(&mut jobs, chained);
    // `cluster_combine` needs 2 to 8 splits, which fa3 has not: named on fa3 with each,
    // on a grid of one tile per CTA and on a persistent one.
    for split in [SplitKv::K2, SplitKv::K4, SplitKv::K8] {
        for persistent in Switch::ALL {
            let cluster = evo_genome::Genome {
                split_kv: split,
                cluster_combine: Switch::On,
                persistent: *persistent,
                ..fa3.genes
            };
            at_every_fitting_head_dim(&mut jobs, cluster);
        }
    }
    // `o_store = "direct"` on a persistent grid, where it frees O's buffer: fa3 persistent
    // at every head dim that fits, and FlashAttention-3's 128 x 176 and 128 x 192 D128
    // tiles with two stages, which fit only so.
    for block_n in [fa3.genes.block_n, BlockN::N176, BlockN::N192] {
        let direct = evo_genome::Genome {
            persistent: Switch::On,
            o_store: OStore::Direct,
            block_n,
            stages: Stages::S2,
            producer_regs: ProducerRegs::R24,
            ..fa3.genes
        };
        at_every_fitting_head_dim(&mut jobs, direct);
    }
    // `o_store = "tma"`: fa3 on a grid of one tile per CTA (O staged in Q's rows), a
    // persistent one (its own O buffer, waited for at the next epilogue) and a chained
    // one (the finished tile's Q slot, waited for before its release), at every head dim
    // that fits; once with the plain-load producer, whose kernel takes the maps only
    // for O.
    for (persistent, overlap, load) in [
        (
            Switch::Off,
            fa3.genes.softmax_overlap,
            fa3.genes.hopper_load,
        ),
        (Switch::On, fa3.genes.softmax_overlap, fa3.genes.hopper_load),
        (Switch::On, Overlap::Chained, fa3.genes.hopper_load),
        (Switch::Off, fa3.genes.softmax_overlap, HopperLoad::Direct),
    ] {
        let tma = evo_genome::Genome {
            persistent,
            softmax_overlap: overlap,
            hopper_load: load,
            o_store: OStore::Tma,
            ..fa3.genes
        };
        at_every_fitting_head_dim(&mut jobs, tma);
    }
    // `wg_split = "keys"`: fa3's warpgroups (and three, with three stages) splitting the
    // tiles, each overlap the rules allow, one tile per CTA and persistent, and merged
    // across a 2-CTA cluster after their own merge, at every head dim that fits.
    for (wgs, stages) in [(ConsumerWgs::C2, Stages::S2), (ConsumerWgs::C3, Stages::S3)] {
        for overlap in [Overlap::Off, Overlap::On] {
            for persistent in Switch::ALL {
                let keys = evo_genome::Genome {
                    wg_split: WgSplit::Keys,
                    consumer_wgs: wgs,
                    stages,
                    softmax_overlap: overlap,
                    persistent: *persistent,
                    ..fa3.genes
                };
                at_every_fitting_head_dim(&mut jobs, keys);
            }
        }
    }
    at_every_fitting_head_dim(
        &mut jobs,
        evo_genome::Genome {
            wg_split: WgSplit::Keys,
            split_kv: SplitKv::K2,
            cluster_combine: Switch::On,
            ..fa3.genes
        },
    );
    assert!(jobs.len() >= 50, "{} jobs", jobs.len());
    assert_no_failures(sweep("hopper alleles", &jobs));
}

/// `reg_cap` must bound the forward kernel's registers: a cap that ptxas overrides
/// (e.g. because `__launch_bounds__` asks for more) makes the gene a no-op.
#[test]
fn reg_cap_bounds_registers() {
    let fa2 = GenomeFile::load(&genome_dir().join("fa2.toml")).expect("fa2.toml");
    let mut broken = Vec::new();
    for cap in [RegCap::R64, RegCap::R96, RegCap::R128] {
        let mut g = fa2.genes;
        g.reg_cap = cap;
        let c = compile_genome(toolchain(), &g, HeadDim::D64, Dtype::F16, Target::Sm90)
            .unwrap_or_else(|e| panic!("{e}"));
        let regs = c.report.kernel(ENTRY_FWD).expect("fwd report").registers;
        if regs > cap.get() {
            let notes: Vec<&str> = c
                .log
                .lines()
                .filter(|l| l.contains("maxrregcount"))
                .collect();
            broken.push(format!(
                "reg_cap = {cap}: {regs} registers; ptxas: {notes:?}"
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn hand_written_source_compiles_with_the_same_path() {
    let source = include_str!("data/spill.cu");
    let opts = CompileOptions {
        reg_cap: Some(32),
        ..CompileOptions::new(Target::Sm89)
    };
    let c = compile_source(toolchain(), "spill.cu", source, &Defines::default(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(c.cubin.starts_with(b"\x7fELF"), "CUBIN is an ELF image");
    assert!(c.ptx.contains(".target sm_89"), "PTX targets sm_89");
    let spill = c
        .report
        .kernel("spill_kernel")
        .expect("spill_kernel reported");
    assert_eq!(spill.registers, 32);
    assert!(spill.spill_stores > 0 && spill.spill_loads > 0, "{spill:?}");
    assert_eq!(c.report.kernel("tiny").map(|k| k.smem_static), Some(1024));
    assert!(c
        .options
        .contains(&format!("-I{}", toolchain().include_dir.display())));
}

#[test]
fn compile_error_keeps_the_log_and_flags() {
    let source = "extern \"C\" __global__ void broken(float* out) { out[0] = EVO_UNDEFINED; }\n";
    let defines = Defines(vec![("EVO_HEAD_DIM".into(), "64".into())]);
    let err = compile_source(
        toolchain(),
        "broken.cu",
        source,
        &defines,
        &CompileOptions::new(Target::Sm90),
    )
    .expect_err("undefined identifier");
    match &err {
        CodegenError::Compile { name, log, options } => {
            assert_eq!(name, "broken.cu");
            assert!(log.contains("broken.cu(1): error"), "{log}");
            assert!(log.contains("EVO_UNDEFINED"), "{log}");
            assert!(options.contains(&"-DEVO_HEAD_DIM=64".to_string()));
        }
        other => panic!("expected Compile, got {other:?}"),
    }
    assert!(err.to_string().contains("--gpu-architecture=sm_90"));
}
