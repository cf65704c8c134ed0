//! What the NVRTC test files share: the toolchain, the named fa3 genome, and the forward
//! kernel's PTX alone.

use evo_codegen::Toolchain;
use evo_genome::{Genome, GenomeFile};
use std::path::Path;
use std::sync::OnceLock;

/// The NVRTC the tests compile with, found once per test process.
pub fn toolchain() -> &'static Toolchain {
    static TC: OnceLock<Toolchain> = OnceLock::new();
    TC.get_or_init(|| Toolchain::discover().unwrap_or_else(|e| panic!("{e}")))
}

/// The named `fa3` genome (genomes/fa3.toml).
pub fn fa3() -> Genome {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../genomes/fa3.toml");
    GenomeFile::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .genes
}

/// The PTX of the forward entry alone (the module also holds the combine kernel).
pub fn fwd_ptx(ptx: &str) -> &str {
    let start = ptx
        .find(".entry evo_attention_fwd")
        .expect("PTX has the evo_attention_fwd entry");
    let rest = &ptx[start + 1..];
    match rest.find(".entry ") {
        Some(end) => &rest[..end],
        None => rest,
    }
}
