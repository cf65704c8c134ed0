//! Tests that compile need NVRTC (`.ci/run` installs it into `.nvrtc/`, which the
//! binary finds from the repository root; or set `EVO_NVRTC_DIR`).

use crate::util::{evo, stderr, stdout};

/// A genome file in a temp dir; returns the dir (kept alive) and the file's path.
fn genome_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("candidate.toml");
    std::fs::write(&path, text).expect("write genome");
    (dir, path.display().to_string())
}

fn fa2_with(replace: &str, with: &str) -> String {
    let text = include_str!("../genomes/fa2.toml");
    assert!(text.contains(replace), "fa2.toml has `{replace}`");
    text.replace(replace, with)
}

#[test]
fn compile_report_lists_both_entries() {
    let out = evo(
        &[
            "compile",
            "genomes/v7a.toml",
            "--arch",
            "sm_90",
            "--emit",
            "report",
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.starts_with("v7a (genomes/v7a.toml), D64 f16, sm_90: wmma/wmma"),
        "{text}"
    );
    for column in [
        "registers",
        "spill_stores",
        "spill_loads",
        "stack_frame",
        "smem_static",
    ] {
        assert!(text.contains(column), "{text}");
    }
    for entry in ["evo_attention_fwd", "evo_attention_combine"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(entry))
            .unwrap_or_else(|| panic!("no row for {entry}:\n{text}"));
        let registers: u32 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!((16..=255).contains(&registers), "{row}");
    }
}

#[test]
fn compile_emits_ptx_for_the_chosen_arch() {
    let out = evo(
        &[
            "compile",
            "genomes/fa2.toml",
            "--arch",
            "sm_89",
            "--emit",
            "ptx",
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains(".target sm_89"), "PTX header");
    assert!(text.contains(".entry evo_attention_fwd"));
    assert!(text.contains("mma.sync.aligned.m16n8k16"));
}

#[test]
fn compile_defines_need_no_toolchain() {
    let out = evo(
        &[
            "compile",
            "genomes/v6a.toml",
            "--head-dim",
            "128",
            "--dtype",
            "bf16",
            "--emit",
            "defines",
        ],
        &[("EVO_NVRTC_DIR", "/nonexistent/nvrtc")],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<&str> = text.lines().collect();
    // 20 genes' macros, the shared-memory plan, and EVO_LSE=0: a genome compiles without
    // the log-sum-exp output (its twin for training is built with EVO_LSE=1).
    assert_eq!(lines.len(), 22, "{text}");
    assert_eq!(lines.last(), Some(&"-DEVO_LSE=0"), "{text}");
    assert_eq!(lines[0], "-DEVO_HEAD_DIM=128");
    assert_eq!(lines[1], "-DEVO_BF16=1");
    assert!(lines.contains(&"-DEVO_QK_MATH=1"), "{text}");
}

#[test]
fn invalid_genome_names_file_and_every_rule() {
    // WMMA Q·Kᵀ with P in registers and a swizzled layout breaks two rules.
    let (_dir, path) = genome_file(&fa2_with("qk_math = \"mma\"", "qk_math = \"wmma\""));
    let out = evo(&["compile", &path], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{path}: genome `fa2` at D64 on sm_90")),
        "{err}"
    );
    assert!(err.contains("rule `p_regs_needs_mma` failed"), "{err}");
    assert!(
        err.contains("rule `swizzle_needs_addressed_loads` failed"),
        "{err}"
    );
    assert!(err.contains("fix: "), "{err}");
}

#[test]
fn malformed_toml_names_file_line_and_field() {
    let (_dir, path) = genome_file(&fa2_with("block_m = 64", "blocks_m = 64"));
    let line = include_str!("../genomes/fa2.toml")
        .lines()
        .position(|l| l.starts_with("block_m"))
        .unwrap()
        + 1;
    let out = evo(&["compile", &path], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{path}:{line}:")), "{err}");
    assert!(err.contains("blocks_m"), "{err}");
}

#[test]
fn bad_allele_names_file_and_line() {
    let (_dir, path) = genome_file(&fa2_with("block_n = 64", "block_n = 40"));
    let line = include_str!("../genomes/fa2.toml")
        .lines()
        .position(|l| l.starts_with("block_n"))
        .unwrap()
        + 1;
    let out = evo(&["compile", &path], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{path}:{line}:")), "{err}");
    assert!(err.contains("40 is not an allele of BlockN"), "{err}");
}

#[test]
fn missing_toolchain_exits_2_with_the_install_command() {
    let out = evo(
        &["compile", "genomes/v7a.toml"],
        &[("EVO_NVRTC_DIR", "/nonexistent/nvrtc")],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot compile genomes/v7a.toml"), "{err}");
    assert!(
        err.contains("EVO_NVRTC_DIR = /nonexistent/nvrtc: not a directory"),
        "{err}"
    );
    assert!(
        err.contains("pip install nvidia-cuda-nvrtc==13.5.37"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn compile_cubin_info_is_a_cuda_elf_with_the_flags() {
    let out = evo(
        &[
            "compile",
            "genomes/v3.toml",
            "--arch",
            "sm_89",
            "--emit",
            "cubin-info",
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("format: ELF, EM_CUDA"), "{text}");
    assert!(text.contains("--gpu-architecture=sm_89"), "{text}");
    assert!(text.contains("-DEVO_QK_MATH=0"), "{text}");
}
