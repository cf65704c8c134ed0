//! The Hopper template at head dims 96 and 256 (NVRTC, no GPU): FlashAttention-3's
//! tiles for them compile without spills, and P·V's wgmma has the N the padded tiles
//! give (D96: 128). That every valid Hopper genome's alleles compile at both head dims
//! is the covering sweep's (tests/compile.rs, `nvrtc_sweep_covering_design`): it
//! reaches every allele, and every pair of path switches, at every head dimension.

mod common;

use common::{fa3, fwd_ptx, toolchain};
use evo_codegen::*;
use evo_genome::{BlockN, Dtype, Genome, HeadDim, Target};

#[test]
fn flash_attention_3_tiles_compile_at_d96_and_d256() {
    // FlashAttention-3's D96 tile is 192 x 144 (three warpgroups), which D96's padded
    // O (64 registers) does not fit in 160; 128 x 144 does. D256: 128 x 80.
    let d96 = Genome {
        block_n: BlockN::N144,
        ..fa3()
    };
    let d256 = Genome {
        block_n: BlockN::N80,
        ..fa3()
    };
    for (g, d, pv_n) in [(d96, HeadDim::D96, 128), (d256, HeadDim::D256, 256)] {
        for dtype in Dtype::ALL {
            let c = compile_genome(toolchain(), &g, d, dtype, Target::Sm90)
                .unwrap_or_else(|e| panic!("D{d} {dtype}: {e}"));
            let k = c
                .report
                .kernel("evo_attention_fwd")
                .expect("a ptxas report");
            assert_eq!(
                (k.spill_stores, k.spill_loads),
                (0, 0),
                "D{d} {dtype} spills"
            );
            let ptx = fwd_ptx(&c.ptx);
            // S = Q K^T at N = block_n, O += P V at N = the stored columns, nothing else.
            let pv = format!("m64n{pv_n}k16");
            let qk = format!("m64n{}k16", g.block_n.get());
            assert!(ptx.contains(&pv), "D{d}: no {pv} wgmma");
            assert!(ptx.contains(&qk), "D{d}: no {qk} wgmma");
            for line in ptx.lines().filter(|l| l.contains("wgmma.mma_async")) {
                assert!(
                    line.contains(&pv) || line.contains(&qk),
                    "D{d}: unexpected wgmma {line}"
                );
            }
        }
    }
}
