//! The backward templates through NVRTC (no GPU needed): a covering design of the
//! backward families' valid spaces (`ampere_bwd`, kernels/attention_bwd.cu, on both
//! targets; `hopper_bwd`, kernels/attention_bwd_sm90.cu, on sm_90a: every allele of every
//! gene and every pair of their path switches, at every head dimension where the rules
//! allow it, both dtypes; see `covering`), and the FlashAttention-2 genome `fa2-bwd` at
//! D64 and D128 without spills (`fa3-bwd`'s is in bwd_sm90_compile.rs). Needs the
//! toolchain that `.ci/run` installs (or `EVO_NVRTC_DIR`).

// The shared NVRTC test helpers: this file needs the toolchain alone.
#[allow(dead_code)]
mod common;
mod covering;

use common::toolchain;
use evo_codegen::*;
use evo_genome::{
    DkvSplit, DqMode, Dtype, Family, GenomeFile, HeadDim, KvLoad, Pass, ProducerRegs, Target,
};
use std::path::Path;
use std::time::Instant;

/// The four kernels every backward module exports, in launch order.
const ENTRIES: [&str; 4] = [ENTRY_BWD_PRE, ENTRY_BWD, ENTRY_BWD_DQ, ENTRY_BWD_POST];

fn fa2_bwd() -> GenomeFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa2-bwd.toml");
    GenomeFile::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether PTX holds a float atomic add to global memory (`atomicAdd` on a float
/// lowers to `red` when its result is unused, `atom` otherwise; sm_90 may vectorise).
fn has_float_atomic_add(ptx: &str) -> bool {
    ptx.lines().any(|l| {
        let l = l.trim_start();
        (l.starts_with("red.") || l.starts_with("atom.")) && l.contains(".add") && l.contains("f32")
    })
}

/// What the genome says must show in its module, as broken expectations.
fn ptx_mismatches(g: &evo_genome::Genome, c: &Compiled) -> Vec<String> {
    let ptx = &c.ptx;
    let mut out = Vec::new();
    for entry in ENTRIES {
        if !ptx.contains(&format!(".entry {entry}(")) {
            out.push(format!(
                "no `{entry}` entry: every backward module exports all four"
            ));
        }
    }
    if !ptx.contains(BWD_GEOMETRY_SYMBOL) {
        out.push(format!("no `{BWD_GEOMETRY_SYMBOL}` constant"));
    }
    let hopper = g.family == Family::HopperBwd;
    let (math, why) = if hopper {
        (
            "wgmma.mma_async",
            "the Hopper backward is wgmma by definition",
        )
    } else {
        (
            "mma.sync.aligned.m16n8k16",
            "the family is mma.sync by definition",
        )
    };
    if !ptx.contains(math) {
        out.push(format!("no {math}: {why}"));
    }
    // dq separate promises a bitwise repeatable backward: no float atomics anywhere;
    // tma_reduce adds by bulk reduce-adds from shared memory, not from registers.
    let atomics = has_float_atomic_add(ptx);
    if (g.dq_mode == DqMode::Atomic) != atomics {
        out.push(format!(
            "dq_mode = \"{}\": float atomic adds {}",
            g.dq_mode,
            if atomics { "present" } else { "absent" }
        ));
    }
    let bulk = ptx.contains("cp.reduce.async.bulk");
    if (g.dq_mode == DqMode::TmaReduce) != bulk {
        out.push(format!(
            "dq_mode = \"{}\": bulk reduce-adds {}",
            g.dq_mode,
            if bulk { "present" } else { "absent" }
        ));
    }
    let cp_async = ptx.contains("cp.async.");
    if hopper {
        // The producer warpgroup always streams Q and dO with cp.async; setmaxnreg
        // exactly when the producer gives registers up.
        if !cp_async {
            out.push("no cp.async: the Hopper backward's producer uses it".into());
        }
        let setmaxnreg = ptx.contains("setmaxnreg");
        if (g.producer_regs != ProducerRegs::None) != setmaxnreg {
            out.push(format!(
                "producer_regs = {}: setmaxnreg {}",
                g.producer_regs,
                if setmaxnreg { "present" } else { "absent" }
            ));
        }
    } else if (g.kv_load == KvLoad::CpAsync) != cp_async {
        out.push(format!(
            "kv_load = \"{}\": cp.async {}",
            g.kv_load,
            if cp_async { "present" } else { "absent" }
        ));
    }
    out
}

/// The covering design's property for the backward cells, on the CPU: every allele and
/// path pair reached, every job valid where it compiles, no job of another pass.
#[test]
fn bwd_covering_sweep_reaches_every_allele_on_every_target() {
    let cells = covering::cells_for_pass(Pass::Backward);
    let jobs = covering::jobs(&cells);
    assert!(jobs.iter().all(|(g, ..)| g.pass() == Pass::Backward));
    let per_family: Vec<String> = Pass::Backward
        .families()
        .map(|f| format!("{f} {}", jobs.iter().filter(|j| j.0.family == f).count()))
        .collect();
    eprintln!(
        "[backward covering] {} jobs: {}",
        jobs.len(),
        per_family.join(", ")
    );
    let missing = covering::missing(&cells, &jobs);
    assert!(
        missing.is_empty(),
        "{} goals not reached by the {} backward covering jobs:\n{}",
        missing.len(),
        jobs.len(),
        missing.join("\n")
    );
    // Every family on each target it runs on and every head dim with a valid kernel
    // have jobs, in both dtypes; at D256 only hopper_bwd has any (split by columns: two
    // warpgroups share 64 keys, each holding half of dK and dV), and it has some.
    for family in Pass::Backward.families() {
        for &target in covering::targets_of(family) {
            for d in HeadDim::ALL {
                if d == HeadDim::D256 && family != Family::HopperBwd {
                    continue;
                }
                for dtype in Dtype::ALL {
                    assert!(
                        jobs.iter()
                            .any(|j| (j.0.family, j.1, j.2, j.3) == (family, d, dtype, target)),
                        "no {family} job at D{d} {dtype} {target}"
                    );
                }
            }
        }
    }
    assert!(jobs
        .iter()
        .filter(|j| j.1 == HeadDim::D256)
        .all(|j| j.0.family == Family::HopperBwd && j.0.dkv_split == DkvSplit::Columns));
    assert!(jobs
        .iter()
        .all(|j| j.0.family != Family::HopperBwd || j.3 == Target::Sm90));
    // The forward's cells hold no backward family.
    assert!(covering::cells()
        .iter()
        .all(|c| c.family.pass() == Pass::Forward));
}

/// Every backward covering job compiled, each module checked (four entries, the
/// geometry, mma.sync or wgmma, red adds exactly with atomic dQ and bulk reduce-adds
/// exactly with tma_reduce, cp.async exactly with cp_async for ampere_bwd, setmaxnreg
/// exactly with producer_regs for hopper_bwd).
#[test]
fn nvrtc_sweep_backward_covering_design() {
    let tc = toolchain();
    let jobs = covering::jobs(&covering::cells_for_pass(Pass::Backward));
    let start = Instant::now();
    let results = compile_many(tc, &jobs);
    let wall = start.elapsed().as_secs_f64();
    let mut failures = Vec::new();
    let mut worst: Option<(u32, String)> = None;
    let mut spilling = Vec::new();
    for ((g, d, dtype, target), result) in jobs.iter().zip(&results) {
        let what = format!("{} D{d} {dtype} {target}", g.summary());
        match result {
            Err(e) => failures.push(format!("{what}: {e}")),
            Ok(c) => {
                let problems = ptx_mismatches(g, c);
                if !problems.is_empty() {
                    failures.push(format!("{what}: {}", problems.join("; ")));
                }
                for k in &c.report.kernels {
                    if worst.as_ref().is_none_or(|(r, _)| k.registers > *r) {
                        worst = Some((k.registers, format!("{} of {what}", k.name)));
                    }
                    if k.spill_stores + k.spill_loads > 0 {
                        spilling.push(format!(
                            "{} of {what}: {} + {} bytes",
                            k.name, k.spill_stores, k.spill_loads
                        ));
                    }
                }
            }
        }
    }
    let (regs, regs_at) = worst.unwrap_or_default();
    eprintln!(
        "[backward covering] {} compiles in {wall:.1} s on {} rayon threads ({}, template {}); \
         {} failed; most registers {regs} ({regs_at}); {} kernels spill{}",
        jobs.len(),
        rayon::current_num_threads(),
        tc.label(),
        template_hash(),
        failures.len(),
        spilling.len(),
        if spilling.is_empty() {
            String::new()
        } else {
            format!(":\n  {}", spilling.join("\n  "))
        }
    );
    assert!(
        failures.is_empty(),
        "{} of {} backward compiles failed; the first {}:\n\n{}",
        failures.len(),
        jobs.len(),
        failures.len().min(8),
        failures
            .iter()
            .take(8)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

/// FlashAttention-2's backward design compiles at D64 and D128, both dtypes, on every
/// target it is valid on, and no kernel of its module spills.
#[test]
fn fa2_bwd_compiles_without_spills_at_d64_and_d128() {
    let tc = toolchain();
    let g = fa2_bwd().genes;
    let mut jobs = Vec::new();
    for target in Target::ALL {
        for d in [HeadDim::D64, HeadDim::D128] {
            if g.is_valid(d, target) {
                for dtype in Dtype::ALL {
                    jobs.push((g, d, dtype, target));
                }
            }
        }
    }
    // D64 on both targets, D128 on sm_90 (its K, V and Q/dO ring exceed the L4's 99 KiB).
    assert_eq!(jobs.len(), 6);
    let mut problems = Vec::new();
    for ((_, d, dtype, target), result) in jobs.iter().zip(compile_many(tc, &jobs)) {
        let what = format!("fa2-bwd D{d} {dtype} {target}");
        let c = match result {
            Ok(c) => c,
            Err(e) => {
                problems.push(format!("{what}: {e}"));
                continue;
            }
        };
        problems.extend(
            ptx_mismatches(&g, &c)
                .into_iter()
                .map(|p| format!("{what}: {p}")),
        );
        let defines = defines(&g, *d, *dtype);
        assert_eq!(defines.get("EVO_DQ_SEPARATE"), Some("0"));
        assert_eq!(defines.get("EVO_DQ_SMEM_BYTES"), Some("0"));
        assert_eq!(defines.get("EVO_EXP2"), Some("1"));
        for entry in [ENTRY_BWD, ENTRY_BWD_PRE, ENTRY_BWD_POST] {
            match c.report.kernel(entry) {
                None => problems.push(format!("{what}: no ptxas report for {entry}")),
                Some(k) => {
                    eprintln!(
                        "[fa2-bwd] {what} {entry}: {} registers, {} + {} spill bytes",
                        k.registers, k.spill_stores, k.spill_loads
                    );
                    if k.spill_stores + k.spill_loads > 0 {
                        problems.push(format!(
                            "{what}: {entry} spills {} + {} bytes ({} registers)",
                            k.spill_stores, k.spill_loads, k.registers
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
