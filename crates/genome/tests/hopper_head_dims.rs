//! The Hopper family's rules at head dims 96 and 256 (kernels/attention_sm90.cu: tiles
//! in 64-column blocks, D96 padded to 128 columns; D256's O is 128 registers a thread).

use evo_genome::rules::{self, HOPPER_ALIGN_SLACK, HOPPER_BARRIERS};
use evo_genome::{
    BlockN, ConsumerWgs, Genome, HeadDim, ProducerRegs, Rule, Stages, Switch, Target,
};

mod common;
use common::{fa3, failed};

#[test]
fn d96_tiles_are_stored_128_columns_wide() {
    assert_eq!(rules::hopper_stored_columns(HeadDim::D64), 64);
    assert_eq!(rules::hopper_stored_columns(HeadDim::D96), 128);
    assert_eq!(rules::hopper_stored_columns(HeadDim::D128), 128);
    assert_eq!(rules::hopper_stored_columns(HeadDim::D256), 256);
    // The shared-memory plan and the accumulators of D96 are D128's.
    for g in [
        fa3(),
        Genome {
            persistent: Switch::On,
            block_n: BlockN::N80,
            ..fa3()
        },
    ] {
        assert_eq!(g.smem(HeadDim::D96), g.smem(HeadDim::D128));
        assert_eq!(
            rules::register_accumulators(&g, HeadDim::D96),
            rules::register_accumulators(&g, HeadDim::D128)
        );
        assert!(g.is_valid(HeadDim::D96, Target::Sm90));
    }
}

#[test]
fn d256_accepts_flash_attention_3s_128_by_80_tile() {
    let g = Genome {
        block_n: BlockN::N80,
        ..fa3()
    };
    assert!(
        g.is_valid(HeadDim::D256, Target::Sm90),
        "{:?}",
        g.violations(HeadDim::D256, Target::Sm90)
    );
    // O 128 + S 40 + P 20 registers of the consumers' 240.
    assert_eq!(rules::register_accumulators(&g, HeadDim::D256), 188);
    // Q 128 x 256 + two stages of K and V, 80 x 256 each.
    let smem = g.smem(HeadDim::D256);
    assert_eq!(smem.q, 128 * 256 * 2);
    assert_eq!(smem.kv, 2 * 2 * 80 * 256 * 2);
    assert_eq!(
        smem.total(),
        HOPPER_ALIGN_SLACK + HOPPER_BARRIERS + 65536 + 163840
    );
    assert!(smem.total() <= Target::Sm90.smem_per_block());
}

#[test]
fn d256_rejects_what_does_not_fit_naming_the_budget() {
    // fa3's 128-row K/V tiles in two stages: 256 KiB of K and V alone.
    let v = fa3().violations(HeadDim::D256, Target::Sm90);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::SharedMemory);
    assert!(
        v[0].detail.contains("exceed 232448 bytes"),
        "{}",
        v[0].detail
    );
    // One stage of 160 rows fits in shared memory, but O 128 + S 80 + P 40 = 248
    // accumulators exceed the consumers' 240 registers.
    let wide = Genome {
        block_n: BlockN::N160,
        stages: Stages::S1,
        ..fa3()
    };
    let v = wide.violations(HeadDim::D256, Target::Sm90);
    assert_eq!(failed(&wide, HeadDim::D256), vec![Rule::RegisterFile]);
    assert!(
        v[0].detail.contains("248") && v[0].detail.contains("240"),
        "{}",
        v[0].detail
    );
    // 144 rows fit both (236 of 240).
    let fits = Genome {
        block_n: BlockN::N144,
        ..wide
    };
    assert!(fits.is_valid(HeadDim::D256, Target::Sm90));
    // Without setmaxnreg the consumers keep the launch bound's 168: block_n 48 at most.
    let no_regs = Genome {
        block_n: BlockN::N64,
        producer_regs: ProducerRegs::None,
        ..fa3()
    };
    assert_eq!(failed(&no_regs, HeadDim::D256), vec![Rule::RegisterFile]);
    assert!(Genome {
        block_n: BlockN::N48,
        ..no_regs
    }
    .is_valid(HeadDim::D256, Target::Sm90));
}

/// ptxas checks each wgmma against the launch bound: with three consumer warpgroups
/// (128 registers a thread) the m64n256 P·V does not compile ("Insufficient registers
/// (128) ... register target of 158"), whatever setmaxnreg gives the consumers (160).
#[test]
fn d256_needs_at_most_two_consumer_warpgroups() {
    let g = Genome {
        consumer_wgs: ConsumerWgs::C3,
        block_n: BlockN::N16,
        ..fa3()
    };
    assert_eq!(rules::hopper_launch_registers(&g), 128);
    assert_eq!(rules::hopper_consumer_registers(&g), 160);
    let v = g.violations(HeadDim::D256, Target::Sm90);
    assert_eq!(failed(&g, HeadDim::D256), vec![Rule::RegisterFile]);
    assert!(
        v[0].detail.contains("158") && v[0].detail.contains("launch bound"),
        "{}",
        v[0].detail
    );
    assert!(v[0].fix.contains("consumer_wgs"), "{}", v[0].fix);
    // The same genome at D128 (O 64) and with two warpgroups at D256 is fine.
    assert!(g.is_valid(HeadDim::D128, Target::Sm90));
    assert!(g.is_valid(HeadDim::D96, Target::Sm90));
    assert!(Genome {
        consumer_wgs: ConsumerWgs::C2,
        ..g
    }
    .is_valid(HeadDim::D256, Target::Sm90));
    // One warpgroup launches with 256 registers a thread.
    assert!(Genome {
        consumer_wgs: ConsumerWgs::C1,
        pingpong: Switch::Off,
        block_n: BlockN::N80,
        ..g
    }
    .is_valid(HeadDim::D256, Target::Sm90));
}
