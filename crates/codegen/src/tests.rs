//! Unit tests that need no NVRTC: defines, flags, the ptxas parser, discovery failures.

use crate::*;
use evo_genome::{DqMode, Dtype, ExpFn, GenomeFile, HeadDim, RegCap, Target, Tile};
use std::path::{Path, PathBuf};

fn fa2() -> Genome {
    let text = include_str!("../../../genomes/fa2.toml");
    GenomeFile::from_toml_str(text, Path::new("genomes/fa2.toml"))
        .expect("genomes/fa2.toml parses")
        .genes
}

fn pairs(list: &[(&str, &str)]) -> Defines {
    Defines(
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn fa2_defines_d64_f16() {
    // SMEM: Q 64*64*2 = 8192, K/V 2 stages * 2 * 64*64*2 = 32768, stats 3*64*4 = 768.
    let expected = pairs(&[
        ("EVO_HEAD_DIM", "64"),
        ("EVO_BF16", "0"),
        ("EVO_QK_MATH", "2"),
        ("EVO_PV_MATH", "2"),
        ("EVO_P_REGS", "1"),
        ("EVO_O_REGS", "1"),
        ("EVO_BLOCK_M", "64"),
        ("EVO_BLOCK_N", "64"),
        ("EVO_WARPS", "4"),
        ("EVO_PRODUCER_WARPS", "0"),
        ("EVO_CP_ASYNC", "1"),
        ("EVO_STAGES", "2"),
        ("EVO_SMEM_LAYOUT", "2"),
        ("EVO_VEC_BYTES", "16"),
        ("EVO_EXP2", "1"),
        ("EVO_EXP_FMA", "0"),
        ("EVO_SPLIT_KV", "1"),
        ("EVO_MIN_BLOCKS", "1"),
        ("EVO_MAX_REGS", "0"),
        ("EVO_PACK_GQA", "0"),
        ("EVO_SMEM_BYTES", "41728"),
        ("EVO_LSE", "0"),
    ]);
    assert_eq!(defines(&fa2(), HeadDim::D64, Dtype::F16), expected);
}

#[test]
fn fa2_defines_d128_bf16_change_only_dim_dtype_and_smem() {
    let d64 = defines(&fa2(), HeadDim::D64, Dtype::F16);
    let d128 = defines(&fa2(), HeadDim::D128, Dtype::Bf16);
    let changed: Vec<(&str, &str, &str)> = d64
        .0
        .iter()
        .zip(&d128.0)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, b)| (a.0.as_str(), a.1.as_str(), b.1.as_str()))
        .collect();
    // SMEM at D128: Q 16384 + K/V 65536 + stats 768.
    assert_eq!(
        changed,
        [
            ("EVO_HEAD_DIM", "64", "128"),
            ("EVO_BF16", "0", "1"),
            ("EVO_SMEM_BYTES", "41728", "82688"),
        ]
    );
}

#[test]
fn defines_display_is_one_flag_per_line() {
    let d = pairs(&[("EVO_HEAD_DIM", "64"), ("EVO_BF16", "1")]);
    assert_eq!(d.to_string(), "-DEVO_HEAD_DIM=64\n-DEVO_BF16=1\n");
    assert_eq!(d.flags(), ["-DEVO_HEAD_DIM=64", "-DEVO_BF16=1"]);
    assert_eq!(d.get("EVO_BF16"), Some("1"));
    assert_eq!(d.get("EVO_WARPS"), None);
}

#[test]
fn every_genome_gets_the_same_macro_names_in_the_same_order() {
    let names = |g: &Genome| -> Vec<String> {
        defines(g, HeadDim::D128, Dtype::Bf16)
            .0
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(names(&fa2()), names(&Genome::baseline()));
    assert_eq!(names(&fa2()).len(), 22);
}

#[test]
fn the_lse_twin_differs_from_the_plain_build_in_evo_lse_only() {
    let hopper = Genome {
        family: Family::Hopper,
        ..fa2()
    };
    for g in [fa2(), hopper] {
        let plain = defines(&g, HeadDim::D128, Dtype::Bf16);
        assert_eq!(
            build_defines(&g, HeadDim::D128, Dtype::Bf16, Build::Plain).as_ref(),
            Some(&plain)
        );
        let twin = build_defines(&g, HeadDim::D128, Dtype::Bf16, Build::LseTwin).unwrap();
        let changed: Vec<_> = plain
            .0
            .iter()
            .zip(&twin.0)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (a.0.as_str(), a.1.as_str(), b.1.as_str()))
            .collect();
        assert_eq!(changed, [(LSE_MACRO, "0", "1")], "{:?}", g.family);
        assert_eq!(plain.0.len(), twin.0.len());
    }
    // A backward genome writes no lse: no EVO_LSE, no twin.
    let bwd = fa2_bwd();
    assert_eq!(defines(&bwd, HeadDim::D64, Dtype::F16).get(LSE_MACRO), None);
    assert_eq!(
        build_defines(&bwd, HeadDim::D64, Dtype::F16, Build::LseTwin),
        None
    );
    assert!(CodegenError::NoLseTwin {
        family: bwd.family.label()
    }
    .to_string()
    .contains("compile its plain build"));
}

#[test]
fn options_default_flags() {
    assert_eq!(
        CompileOptions::new(Target::Sm90).build(),
        [
            "--gpu-architecture=sm_90",
            "--std=c++17",
            "--ptxas-options=-v"
        ]
    );
}

#[test]
fn options_all_flags_in_order() {
    let opts = CompileOptions {
        target: Target::Sm89,
        arch_specific: false,
        reg_cap: Some(96),
        include_dirs: vec![PathBuf::from("/a/include"), PathBuf::from("kernels")],
        verbose_ptxas: false,
        extra: vec!["-lineinfo".into()],
    };
    assert_eq!(
        opts.build(),
        [
            "--gpu-architecture=sm_89",
            "--std=c++17",
            "--maxrregcount=96",
            "-I/a/include",
            "-Ikernels",
            "-lineinfo"
        ]
    );
}

#[test]
fn hopper_genomes_compile_for_sm_90a() {
    let fa3 =
        GenomeFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa3.toml"))
            .unwrap();
    let flags = genome_options(&fa3.genes, Target::Sm90).build();
    assert_eq!(flags[0], "--gpu-architecture=sm_90a");
    assert_eq!(
        genome_options(&fa2(), Target::Sm90).build()[0],
        "--gpu-architecture=sm_90"
    );
    assert_eq!(template_for(&fa3.genes).0, HOPPER_TEMPLATE_PATH);
    let d = defines(&fa3.genes, HeadDim::D128, Dtype::F16);
    assert_eq!(d.get("EVO_CONSUMER_WGS"), Some("2"));
    assert_eq!(d.get("EVO_KV_LOAD"), Some("2"));
    assert_eq!(d.get("EVO_PINGPONG"), Some("1"));
    assert_eq!(d.get("EVO_OVERLAP"), Some("1"));
    assert_eq!(d.get("EVO_PRODUCER_REGS"), Some("24"));
    assert_eq!(
        d.get("EVO_SMEM_BYTES"),
        Some(fa3.genes.smem(HeadDim::D128).total().to_string().as_str())
    );
    // The Ampere macros are not defined for the Hopper template.
    assert_eq!(d.get("EVO_WARPS"), None);
}

#[test]
fn options_never_use_fast_math() {
    let mut g = fa2();
    g.reg_cap = RegCap::R255;
    let flags = genome_options(&g, Target::Sm90).build();
    assert!(flags.iter().all(|f| !f.contains("fast_math")), "{flags:?}");
}

#[test]
fn genome_reg_cap_becomes_a_macro_not_a_flag() {
    let mut g = fa2();
    assert_eq!(
        defines(&g, HeadDim::D64, Dtype::F16).get("EVO_MAX_REGS"),
        Some("0")
    );
    g.reg_cap = RegCap::R128;
    assert_eq!(
        defines(&g, HeadDim::D64, Dtype::F16).get("EVO_MAX_REGS"),
        Some("128")
    );
    let opts = genome_options(&g, Target::Sm90);
    assert_eq!(opts.reg_cap, None);
    assert!(opts.build().iter().all(|f| !f.contains("maxrregcount")));
}

fn resources(
    name: &str,
    registers: u32,
    barriers: u32,
    spills: (u32, u32),
    stack_frame: u32,
    smem_static: u32,
    cmem: &[(u32, u32)],
) -> KernelResources {
    KernelResources {
        name: name.into(),
        registers,
        barriers,
        spill_stores: spills.0,
        spill_loads: spills.1,
        stack_frame,
        smem_static,
        cmem: cmem.iter().copied().collect(),
    }
}

#[test]
fn ptxas_report_sm90_template() {
    // Captured from NVRTC 13.5.37: genomes/fa2.toml, D64 f16, sm_90.
    let report = PtxasReport::parse(include_str!("testdata/fa2_d64_f16_sm90.log"));
    assert_eq!(
        report.kernels,
        [
            resources("evo_attention_combine", 32, 0, (0, 0), 0, 0, &[]),
            resources("evo_attention_fwd", 138, 1, (0, 0), 0, 0, &[]),
        ]
    );
    assert_eq!(report.kernel(ENTRY_FWD).map(|k| k.registers), Some(138));
    assert!(report.kernel("missing").is_none());
}

#[test]
fn ptxas_report_sm89_template_with_module_lines() {
    // Captured from NVRTC 13.5.37: fa2 with reg_cap = 64, D128 bf16, sm_89. The
    // module-level `gmem`/`cmem[3]` line and the maxrregcount override note
    // belong to no entry and must not be attributed to one.
    let report = PtxasReport::parse(include_str!("testdata/fa2_cap64_d128_bf16_sm89.log"));
    assert_eq!(
        report.kernels,
        [
            resources("evo_attention_combine", 40, 0, (0, 0), 0, 0, &[(0, 392)]),
            resources("evo_attention_fwd", 190, 1, (0, 0), 0, 0, &[(0, 424)]),
        ]
    );
}

#[test]
fn ptxas_report_spills_stack_and_static_smem() {
    // Captured from NVRTC 13.5.37: tests/data/spill.cu with --maxrregcount=32 on sm_89.
    // `_Z6helperf` is a non-inlined device function: its properties are not an entry's.
    let report = PtxasReport::parse(include_str!("testdata/spill_sm89.log"));
    assert_eq!(
        report.kernels,
        [
            resources("tiny", 10, 1, (0, 0), 0, 1024, &[(0, 360)]),
            resources("spill_kernel", 32, 0, (668, 724), 624, 0, &[(0, 372)]),
        ]
    );
}

#[test]
fn ptxas_report_of_a_log_without_ptxas_lines_is_empty() {
    let log = "kernels/attention.cu(80): warning #177-D: variable \"x\" was declared but never referenced\n";
    assert_eq!(PtxasReport::parse(log), PtxasReport::default());
}

#[test]
fn template_hash_is_16_hex_of_every_template() {
    let hash = template_hash();
    assert_eq!(hash.len(), 16);
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{hash}");
    let mut all = template_source().to_string();
    all.push_str(hopper_template_source());
    all.push_str(bwd_template_source());
    all.push_str(hopper_bwd_template_source());
    assert!(blake3::hash(all.as_bytes()).to_hex().starts_with(&hash));
}

fn fa2_bwd() -> Genome {
    let text = include_str!("../../../genomes/fa2-bwd.toml");
    GenomeFile::from_toml_str(text, Path::new("genomes/fa2-bwd.toml"))
        .expect("genomes/fa2-bwd.toml parses")
        .genes
}

#[test]
fn fa2_bwd_defines_d128_f16() {
    // main: K, V 2*128*128*2 = 65536; Q, dO 2 stages * 2*64*128*2 = 65536; lse, dpsum
    // 2 stages * 2*64*4 = 1024; dS^T 128*(64+8)*2 = 18432.
    let expected = pairs(&[
        ("EVO_HEAD_DIM", "128"),
        ("EVO_BF16", "0"),
        ("EVO_BLOCK_M", "64"),
        ("EVO_BLOCK_N", "128"),
        ("EVO_WARPS", "8"),
        ("EVO_CP_ASYNC", "1"),
        ("EVO_STAGES", "2"),
        ("EVO_SMEM_LAYOUT", "2"),
        ("EVO_VEC_BYTES", "16"),
        ("EVO_EXP2", "1"),
        ("EVO_MIN_BLOCKS", "1"),
        ("EVO_MAX_REGS", "0"),
        ("EVO_DQ_SEPARATE", "0"),
        ("EVO_SMEM_BYTES", "150528"),
        ("EVO_DQ_SMEM_BYTES", "0"),
    ]);
    assert_eq!(defines(&fa2_bwd(), HeadDim::D128, Dtype::F16), expected);
}

#[test]
fn backward_genomes_build_their_template_for_plain_sm_89_and_sm_90() {
    let g = fa2_bwd();
    assert_eq!(template_for(&g).0, BWD_TEMPLATE_PATH);
    assert!(template_for(&g)
        .1
        .contains("#line 1 \"kernels/attention_bwd_kernel.cuh\""));
    for target in Target::ALL {
        assert_eq!(
            genome_options(&g, target).build()[0],
            format!("--gpu-architecture={}", target.arch())
        );
    }
    // The exp gene is one macro of three values; dq separate sizes the dq kernel.
    let exp = |e: ExpFn| {
        let d = defines(&Genome { exp: e, ..g }, HeadDim::D64, Dtype::Bf16);
        d.get("EVO_EXP2").map(str::to_string)
    };
    assert_eq!(
        [exp(ExpFn::Exp), exp(ExpFn::Exp2), exp(ExpFn::Exp2Fma)],
        [Some("0".into()), Some("1".into()), Some("2".into())]
    );
    let separate = Genome {
        dq_mode: DqMode::Separate,
        block_m: Tile::T128,
        ..g
    };
    let d = defines(&separate, HeadDim::D64, Dtype::Bf16);
    assert_eq!(d.get("EVO_BF16"), Some("1"));
    assert_eq!(d.get("EVO_DQ_SEPARATE"), Some("1"));
    assert_eq!(
        d.get("EVO_DQ_SMEM_BYTES"),
        Some(
            (2 * 128 * 64 * 2 + 2 * 2 * 128 * 64 * 2 + 2 * 128 * 4)
                .to_string()
                .as_str()
        )
    );
    // The forward's genes that do not apply are not defined.
    assert_eq!(d.get("EVO_QK_MATH"), None);
    assert_eq!(d.get("EVO_SPLIT_KV"), None);
}

#[test]
fn fa3_bwd_d256_defines_split_by_columns() {
    // Two warpgroups share 64 keys (EVO_BLOCK_N = 64 x 2 / 2); main: K, V 2*64*256*2 =
    // 65536; Q, dO 1 stage * 2*64*256*2 = 65536; dS^T and P^T 4*64*64*2 = 32768; dQ
    // staging 2 warpgroups * 2 units * 16384 = 65536; lse, dpsum 2*64*4 = 512; barriers
    // 256 and alignment 1024.
    let text = include_str!("../../../genomes/fa3-bwd-d256.toml");
    let g = GenomeFile::from_toml_str(text, Path::new("genomes/fa3-bwd-d256.toml"))
        .expect("genomes/fa3-bwd-d256.toml parses")
        .genes;
    let expected = pairs(&[
        ("EVO_HEAD_DIM", "256"),
        ("EVO_BF16", "0"),
        ("EVO_BLOCK_N", "64"),
        ("EVO_BLOCK_M", "64"),
        ("EVO_CONSUMER_WGS", "2"),
        ("EVO_STAGES", "1"),
        ("EVO_EXP2", "1"),
        ("EVO_DQ_SEPARATE", "0"),
        ("EVO_DQ_BULK", "1"),
        ("EVO_PRODUCER_REGS", "32"),
        ("EVO_DKV_COLUMNS", "1"),
        ("EVO_SMEM_BYTES", "231168"),
        ("EVO_DQ_SMEM_BYTES", "0"),
    ]);
    assert_eq!(defines(&g, HeadDim::D256, Dtype::F16), expected);
    // Split by keys: 64 keys per warpgroup, the flag off.
    let keys = Genome {
        dkv_split: evo_genome::DkvSplit::Keys,
        ..g
    };
    let d = defines(&keys, HeadDim::D128, Dtype::F16);
    assert_eq!(
        (d.get("EVO_BLOCK_N"), d.get("EVO_DKV_COLUMNS")),
        (Some("128"), Some("0"))
    );
}

fn missing_message(paths: &[SearchPath]) -> String {
    match Toolchain::discover_in(paths) {
        Err(e @ CodegenError::ToolchainMissing { .. }) => e.to_string(),
        other => panic!("expected ToolchainMissing, got {other:?}"),
    }
}

#[test]
fn discovery_failure_says_where_it_looked_and_how_to_install() {
    let nowhere = SearchPath {
        origin: "EVO_NVRTC_DIR".into(),
        root: PathBuf::from("/nonexistent/evo-nvrtc"),
    };
    let message = missing_message(&[nowhere]);
    assert!(
        message.contains("EVO_NVRTC_DIR = /nonexistent/evo-nvrtc: not a directory"),
        "{message}"
    );
    assert!(
        message.contains(
            "pip install nvidia-cuda-nvrtc==13.5.37 nvidia-cuda-runtime==13.5.37 \
             nvidia-cuda-crt==13.5.37 --target .nvrtc"
        ),
        "{message}"
    );
}

#[test]
fn discovery_failure_on_a_folder_without_headers() {
    let empty = tempfile::tempdir().expect("temp dir");
    let message = missing_message(&[SearchPath {
        origin: "CUDA_HOME".into(),
        root: empty.path().to_path_buf(),
    }]);
    assert!(
        message.contains("no include/{cuda_fp16.h,cuda_bf16.h,mma.h} here or under nvidia/cu13/"),
        "{message}"
    );
}

#[test]
fn discovery_rejects_a_broken_library_without_panicking() {
    // The pip layout with the headers present but a libnvrtc that is not an ELF file.
    let root = tempfile::tempdir().expect("temp dir");
    let base = root.path().join("nvidia/cu13");
    std::fs::create_dir_all(base.join("include")).expect("mkdir");
    std::fs::create_dir_all(base.join("lib")).expect("mkdir");
    for header in ["cuda_fp16.h", "cuda_bf16.h", "mma.h"] {
        std::fs::write(base.join("include").join(header), "").expect("write header");
    }
    std::fs::write(base.join("lib/libnvrtc.so.13"), "not a library").expect("write lib");
    let message = missing_message(&[SearchPath {
        origin: "EVO_NVRTC_DIR".into(),
        root: root.path().to_path_buf(),
    }]);
    assert!(
        message.contains("libnvrtc.so.13: cannot be loaded"),
        "{message}"
    );
}

#[test]
fn invalid_genome_is_refused_before_nvrtc() {
    // P in registers with WMMA products breaks p_regs_needs_mma; no toolchain is
    // touched, so the error comes back even on a machine without NVRTC.
    let mut g = fa2();
    g.qk_math = evo_genome::Math::Wmma;
    g.smem_layout = evo_genome::SmemLayout::Padded;
    let tc = Toolchain {
        nvrtc_version: (0, 0),
        include_dir: PathBuf::from("/nonexistent"),
        lib_dir: None,
    };
    match compile_genome(&tc, &g, HeadDim::D64, Dtype::F16, Target::Sm90) {
        Err(CodegenError::Invalid(v)) => {
            assert_eq!(
                v.iter().map(|v| v.rule).collect::<Vec<_>>(),
                [evo_genome::Rule::PRegsNeedsMma]
            );
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}
