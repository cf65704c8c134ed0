//! Compiles the Ampere backward template (kernels/attention_bwd.cu) through NVRTC, from
//! its macros alone, independent of the genome layer: genomes/fa2-bwd.toml's design at
//! D64 and D128 must build without spills on sm_89 and sm_90, and every head dim, both
//! dtypes and both dQ modes must build at all. Prints each compile's ptxas report
//! (`cargo test -p evo-codegen --test bwd_template -- --nocapture`).

use evo_codegen::{bwd_template_source, compile_source, CompileOptions, Defines, Toolchain};
use evo_genome::Target;
use std::sync::OnceLock;

/// The NVRTC the tests compile with, found once per test process.
fn toolchain() -> &'static Toolchain {
    static TC: OnceLock<Toolchain> = OnceLock::new();
    TC.get_or_init(|| Toolchain::discover().unwrap_or_else(|e| panic!("{e}")))
}

/// One design of the template, by its macro values.
#[derive(Clone, Copy)]
struct Design {
    block_n: u32,
    block_m: u32,
    warps: u32,
    stages: u32,
    cp_async: u32,
    layout: u32,
    exp: u32,
    dq_separate: u32,
}

/// genomes/fa2-bwd.toml: block_n 128, block_m 64, warps 8, stages 2, cp.async,
/// swizzled, exp2, atomic dQ.
const FA2_BWD: Design = Design {
    block_n: 128,
    block_m: 64,
    warps: 8,
    stages: 2,
    cp_async: 1,
    layout: 2,
    exp: 1,
    dq_separate: 0,
};

/// The host's shared-memory plans (kernels/ABI.md, "The backward ABI"): main, dq.
fn smem(d: &Design, head_dim: u32) -> (u32, u32) {
    let pitch = head_dim + if d.layout == 1 { 8 } else { 0 };
    let main = 2 * d.block_n * pitch * 2
        + d.stages * 2 * d.block_m * pitch * 2
        + d.stages * 2 * d.block_m * 4
        + d.block_n * (d.block_m + 8) * 2;
    let dq = if d.dq_separate == 1 {
        2 * d.block_m * pitch * 2 + d.stages * 2 * d.block_n * pitch * 2 + 2 * d.block_m * 4
    } else {
        0
    };
    (main, dq)
}

fn defines(d: &Design, head_dim: u32, bf16: bool) -> Defines {
    let (main, dq) = smem(d, head_dim);
    let values = [
        ("EVO_HEAD_DIM", head_dim),
        ("EVO_BF16", u32::from(bf16)),
        ("EVO_BLOCK_N", d.block_n),
        ("EVO_BLOCK_M", d.block_m),
        ("EVO_WARPS", d.warps),
        ("EVO_STAGES", d.stages),
        ("EVO_CP_ASYNC", d.cp_async),
        ("EVO_SMEM_LAYOUT", d.layout),
        ("EVO_VEC_BYTES", 16),
        ("EVO_EXP2", d.exp),
        ("EVO_DQ_SEPARATE", d.dq_separate),
        ("EVO_MIN_BLOCKS", 1),
        ("EVO_MAX_REGS", 0),
        ("EVO_SMEM_BYTES", main),
        ("EVO_DQ_SMEM_BYTES", dq),
    ];
    Defines(
        values
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
    )
}

const ENTRIES: [&str; 4] = [
    "evo_attention_bwd_pre",
    "evo_attention_bwd",
    "evo_attention_bwd_dq",
    "evo_attention_bwd_post",
];

/// Compiles one design; returns (entry, registers, spill stores + loads) per entry.
fn build(d: &Design, head_dim: u32, bf16: bool, target: Target) -> Vec<(String, u32, u32)> {
    let compiled = compile_source(
        toolchain(),
        "kernels/attention_bwd.cu",
        // The program as the host builds it.
        bwd_template_source(),
        &defines(d, head_dim, bf16),
        &CompileOptions::new(target),
    )
    .unwrap_or_else(|e| panic!("D{head_dim} bf16={bf16} {}: {e}", target.arch()));
    ENTRIES
        .iter()
        .map(|entry| {
            let k = compiled
                .report
                .kernel(entry)
                .unwrap_or_else(|| panic!("no ptxas report for {entry}"));
            (
                entry.to_string(),
                k.registers,
                k.spill_stores + k.spill_loads,
            )
        })
        .collect()
}

#[test]
fn fa2_bwd_builds_without_spills_at_d64_and_d128() {
    for target in [Target::Sm89, Target::Sm90] {
        for head_dim in [64, 128] {
            let report = build(&FA2_BWD, head_dim, false, target);
            println!("fa2-bwd D{head_dim} {}: {report:?}", target.arch());
            for (entry, _, spills) in &report {
                assert_eq!(
                    *spills,
                    0,
                    "{entry} spills at D{head_dim} on {}",
                    target.arch()
                );
            }
        }
    }
}

#[test]
fn every_head_dim_dtype_and_dq_mode_builds() {
    let separate = Design {
        block_n: 64,
        block_m: 64,
        warps: 4,
        dq_separate: 1,
        exp: 2,
        layout: 1,
        ..FA2_BWD
    };
    let direct = Design {
        cp_async: 0,
        stages: 1,
        layout: 0,
        exp: 0,
        block_m: 16,
        ..FA2_BWD
    };
    for (name, d) in [("separate", separate), ("direct", direct)] {
        for head_dim in [64, 96, 128, 256] {
            for bf16 in [false, true] {
                let report = build(&d, head_dim, bf16, Target::Sm90);
                println!("{name} D{head_dim} bf16={bf16}: {report:?}");
            }
        }
    }
}
