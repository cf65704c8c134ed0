//! The Hopper backward template (`kernels/attention_bwd_sm90.cu`) through NVRTC for
//! `sm_90a` (no GPU needed), as the `hopper_bwd` family builds it: the library's text
//! ([`hopper_bwd_template_source`]) and macros ([`defines`]). FlashAttention-3's backward
//! design, `genomes/fa3-bwd.toml`, compiles without spills at D64, D96 and D128, as does
//! its D64 form with 128-row steps (the experiments' D64 design); the family's covering
//! sweep is in bwd_compile.rs. Needs the toolchain that `.ci/run` installs (or
//! `EVO_NVRTC_DIR`).

// The shared NVRTC test helpers: this file needs the toolchain alone.
#[allow(dead_code)]
mod common;

use common::toolchain;
use evo_codegen::*;
use evo_genome::{DqMode, Dtype, Family, Genome, GenomeFile, HeadDim, Stages, Target, Tile};
use std::path::Path;

const ENTRIES: [&str; 4] = [ENTRY_BWD_PRE, ENTRY_BWD, ENTRY_BWD_DQ, ENTRY_BWD_POST];

fn fa3_bwd() -> Genome {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa3-bwd.toml");
    GenomeFile::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .genes
}

#[test]
fn the_family_builds_the_hopper_backward_template_for_sm_90a() {
    let g = fa3_bwd();
    assert_eq!(g.family, Family::HopperBwd);
    let (path, text) = template_for(&g);
    assert_eq!(path, HOPPER_BWD_TEMPLATE_PATH);
    for file in [
        "mma.cuh",
        "sm90.cuh",
        "attention_bwd_sm90.cu",
        "attention_bwd_common.cuh",
        "attention_bwd_sm90_wgmma.cuh",
        "attention_bwd_sm90_kernel.cuh",
    ] {
        assert!(
            text.contains(&format!("#line 1 \"kernels/{file}\"")),
            "{file}"
        );
    }
    assert!(genome_options(&g, Target::Sm90).arch_specific);
    // Every macro is defined, the measurement switch never.
    let d = defines(&g, HeadDim::D128, Dtype::F16);
    for (name, value) in [
        ("EVO_HEAD_DIM", "128"),
        ("EVO_BF16", "0"),
        ("EVO_BLOCK_N", "128"),
        ("EVO_BLOCK_M", "64"),
        ("EVO_CONSUMER_WGS", "2"),
        ("EVO_STAGES", "3"),
        ("EVO_EXP2", "1"),
        ("EVO_DQ_SEPARATE", "0"),
        ("EVO_DQ_BULK", "1"),
        ("EVO_PRODUCER_REGS", "32"),
        ("EVO_DKV_COLUMNS", "0"),
        ("EVO_SMEM_BYTES", "232192"),
        ("EVO_DQ_SMEM_BYTES", "0"),
    ] {
        assert_eq!(d.get(name), Some(value), "{name}");
    }
    assert_eq!(d.0.len(), 13);
    assert_eq!(d.get("EVO_BENCH_SKIP"), None);
}

#[test]
fn fa3_bwd_compiles_without_spills_at_d64_d96_d128() {
    let tc = toolchain();
    let g = fa3_bwd();
    let mut jobs = Vec::new();
    for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128] {
        for dtype in Dtype::ALL {
            jobs.push((g, d, dtype, Target::Sm90));
        }
    }
    // The experiments' D64 design: 128 query rows a step (232 of 232 registers), with
    // the red adds (three stages) and the bulk adds (two: the staging takes the third).
    let d64 = Genome {
        block_m: Tile::T128,
        dq_mode: DqMode::Atomic,
        ..g
    };
    jobs.push((d64, HeadDim::D64, Dtype::F16, Target::Sm90));
    let d64_bulk = Genome {
        block_m: Tile::T128,
        stages: Stages::S2,
        ..g
    };
    jobs.push((d64_bulk, HeadDim::D64, Dtype::F16, Target::Sm90));
    // Two stages at D128, which the producer's arrivals made as fast as three.
    let two = Genome {
        stages: Stages::S2,
        ..g
    };
    jobs.push((two, HeadDim::D128, Dtype::F16, Target::Sm90));
    // dQ by red adds from the registers, fa3-bwd's other dq_mode.
    for d in [HeadDim::D64, HeadDim::D96, HeadDim::D128] {
        let atomic = Genome {
            dq_mode: DqMode::Atomic,
            ..g
        };
        jobs.push((atomic, d, Dtype::F16, Target::Sm90));
    }
    let mut problems = Vec::new();
    for ((g, d, dtype, _), result) in jobs.iter().zip(compile_many(tc, &jobs)) {
        let what = format!("{} D{d} {dtype}", g.summary());
        let c = match result {
            Ok(c) => c,
            Err(e) => {
                problems.push(format!("{what}: {e}"));
                continue;
            }
        };
        for entry in ENTRIES {
            if !c.ptx.contains(&format!(".entry {entry}(")) {
                problems.push(format!("{what}: no {entry}"));
            }
        }
        // Sᵀ and dPᵀ at N = block_m, dK and dV at N = the stored columns, dQ in units
        // of 64 columns; setmaxnreg; dQ by red adds.
        let ds = d.get().div_ceil(64) * 64;
        for shape in [
            format!("m64n{}k16", g.block_m),
            format!("m64n{ds}k16"),
            "m64n64k16".into(),
        ] {
            if !c.ptx.contains(&shape) {
                problems.push(format!("{what}: no {shape} wgmma"));
            }
        }
        if !c.ptx.contains("setmaxnreg") {
            problems.push(format!("{what}: no register reallocation"));
        }
        let adds = if g.dq_mode == DqMode::TmaReduce {
            c.ptx
                .contains("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32")
        } else {
            c.ptx.contains("red.global.add") || c.ptx.contains("atom.global")
        };
        if !adds {
            problems.push(format!("{what}: dQ ({}) has no float adds", g.dq_mode));
        }
        // The producer signals each stage when its copies land: each producer thread
        // arrives on the stage's mbarrier by `cp.async.mbarrier.arrive.noinc`
        // (kernels/NOTES.md §18). The lagged form waited for all but the last group of
        // copies; nothing does now.
        if !c
            .ptx
            .contains("cp.async.mbarrier.arrive.noinc.shared::cta.b64")
        {
            problems.push(format!("{what}: no cp.async arrival on the stages"));
        }
        if c.ptx.contains("cp.async.wait_group 1;") {
            problems.push(format!("{what}: the producer still lags"));
        }
        match c.report.kernel(ENTRY_BWD) {
            None => problems.push(format!("{what}: no ptxas report for {ENTRY_BWD}")),
            Some(k) => eprintln!(
                "[fa3-bwd] {what}: main {} registers, {} + {} spill bytes",
                k.registers, k.spill_stores, k.spill_loads
            ),
        }
        check_registers(&what, &c, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What ptxas says of the registers: no kernel spills, and no wgmma serialised because
/// an in-flight one's registers could not be kept apart (C7512: the kernel still works,
/// at a fraction of its speed).
fn check_registers(what: &str, c: &Compiled, problems: &mut Vec<String>) {
    if c.log.contains("C7512") {
        problems.push(format!("{what}: ptxas serialises the wgmmas (C7512)"));
    }
    for k in &c.report.kernels {
        if k.spill_stores + k.spill_loads > 0 {
            problems.push(format!(
                "{what}: {} spills {} + {} bytes ({} registers)",
                k.name, k.spill_stores, k.spill_loads, k.registers
            ));
        }
    }
}
