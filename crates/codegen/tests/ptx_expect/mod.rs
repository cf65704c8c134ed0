//! What a genome says must show in its kernel's PTX (tests/compile.rs checks every sweep
//! job with it).

use crate::common::fwd_ptx;
use evo_codegen::*;
use evo_genome::*;

/// What the genome says must show in the code, as a list of broken expectations.
///
/// Only instruction families the genes choose directly are checked; the exp gene is
/// not (IEEE `expf` itself lowers to `ex2.approx`, so both alleles contain it).
pub fn ptx_mismatches(g: &Genome, compiled: &Compiled) -> Vec<String> {
    let all = &compiled.ptx;
    let ptx = fwd_ptx(all);
    let mut out = Vec::new();
    let mut expect = |what: &str, want: bool, have: bool| {
        if want != have {
            out.push(format!(
                "{what}: expected {}, PTX has {}",
                if want { "present" } else { "absent" },
                if have { "it" } else { "none" }
            ));
        }
    };
    if g.family == Family::Hopper {
        expect(
            "wgmma.mma_async (hopper)",
            true,
            ptx.contains("wgmma.mma_async"),
        );
        expect(
            "no mma.sync (hopper)",
            false,
            ptx.contains("mma.sync.aligned.m16n8k16"),
        );
        // O stored by the copy engine: only where O itself is written (one split).
        let tma_o = g.o_store == OStore::Tma && g.split_kv == SplitKv::K1;
        expect(
            "TMA loads, cp.async.bulk.tensor into shared memory (hopper_load = tma)",
            g.hopper_load == HopperLoad::Tma,
            ptx.contains("cp.async.bulk.tensor.3d.shared::cluster.global"),
        );
        expect(
            "TMA stores of O, cp.async.bulk.tensor from shared memory (o_store = tma)",
            tma_o,
            ptx.contains("cp.async.bulk.tensor.3d.global.shared::cta"),
        );
        expect(
            "the evo_tensor_map_o constant (o_store = tma)",
            tma_o,
            all.contains("evo_tensor_map_o"),
        );
        expect(
            "cp.async.cg 16-byte copies (hopper_load = cp_async)",
            g.hopper_load == HopperLoad::CpAsync,
            ptx.contains("cp.async.cg.shared.global"),
        );
        expect(
            "the warpgroups' merge barrier, bar.sync 8 (wg_split = keys)",
            g.wg_split == WgSplit::Keys,
            ptx.contains("bar.sync 8,"),
        );
        expect(
            "setmaxnreg (producer_regs set)",
            g.producer_regs != ProducerRegs::None,
            ptx.contains("setmaxnreg"),
        );
        expect(
            "named-barrier hand-over bar.arrive (pingpong = on)",
            g.pingpong == Switch::On,
            ptx.contains("bar.arrive"),
        );
        expect("mbarrier.try_wait", true, ptx.contains("mbarrier.try_wait"));
        // One cluster per query block's splits: over the grid's split axis (z), or over
        // a persistent grid's row of CTAs (x).
        let cluster = g.cluster_combine == Switch::On;
        let shape = if g.persistent == Switch::On {
            format!("{}, 1, 1", g.split_kv)
        } else {
            format!("1, 1, {}", g.split_kv)
        };
        expect(
            &format!("a cluster shape .reqnctapercluster {shape} (cluster_combine = on)"),
            cluster,
            ptx.contains(&format!(".reqnctapercluster {shape}")),
        );
        expect(
            "st.async into the cluster's exchange (cluster_combine = on)",
            cluster,
            ptx.contains("st.async.shared::cluster.mbarrier::complete_tx::bytes"),
        );
        // One split and no cluster merge: O leaves through the staging (read back with
        // ld.shared.v4) or from the registers.
        if g.split_kv == SplitKv::K1 && !cluster {
            expect(
                "O read back from its shared-memory staging, ld.shared.v4 (o_store = staged)",
                g.o_store == OStore::Staged,
                ptx.contains("ld.shared.v4"),
            );
        }
        expect(
            "the evo_tensor_maps constant (hopper_load = tma, or o_store = tma)",
            g.hopper_load == HopperLoad::Tma || tma_o,
            all.contains("evo_tensor_maps"),
        );
        expect("sm_90a target", true, all.contains(".target sm_90a"));
        return out;
    }
    let uses = |m: Math| g.qk_math == m || g.pv_math == m;
    expect(
        "mma.sync.aligned.m16n8k16 (qk_math or pv_math = mma)",
        uses(Math::Mma),
        ptx.contains("mma.sync.aligned.m16n8k16"),
    );
    if uses(Math::Mma) {
        expect("ldmatrix (mma operands)", true, ptx.contains("ldmatrix"));
    }
    expect(
        "wmma.mma.sync (qk_math or pv_math = wmma)",
        uses(Math::Wmma),
        ptx.contains("wmma.mma.sync"),
    );
    expect(
        "cp.async (kv_load = cp_async)",
        g.kv_load == KvLoad::CpAsync,
        ptx.contains("cp.async."),
    );
    let wide_global = ptx
        .lines()
        .any(|l| l.contains("ld.global") && (l.contains(".v4") || l.contains(".v2")));
    match g.vec_bytes {
        VecBytes::V16 => expect(
            "16-byte K/V/Q loads (ld.global.v4 or cp.async.cg 16, vec_bytes = 16)",
            true,
            ptx.contains("ld.global.nc.v4")
                || ptx.contains("ld.global.v4")
                || ptx.contains("cp.async.cg.shared.global"),
        ),
        VecBytes::V4 => expect(
            "vector global loads or cp.async.cg (vec_bytes = 4)",
            false,
            wide_global || ptx.contains("cp.async.cg"),
        ),
        VecBytes::V8 => {}
    }
    expect(
        "the evo_geometry constant",
        true,
        all.contains("evo_geometry"),
    );
    for entry in [ENTRY_FWD, ENTRY_COMBINE] {
        expect(
            &format!("a ptxas report for {entry}"),
            true,
            compiled.report.kernel(entry).is_some(),
        );
    }
    // The plain build has no lse output (kernels/ABI.md, "The log-sum-exp output"): no
    // evo_lse, and both entries end with an int (window_right, splits).
    if matches!(g.family, Family::Ampere | Family::Hopper) {
        out.extend(lse_mismatches(compiled, Build::Plain));
    }
    out
}

/// What the lse output of a forward build must look like in its PTX: the lse twin
/// declares `evo_lse = {1}` and takes `float* lse` last in both entries, after
/// window_right (an int) and after splits (an int); the plain build has neither.
pub fn lse_mismatches(compiled: &Compiled, build: Build) -> Vec<String> {
    let all = &compiled.ptx;
    let twin = build == Build::LseTwin;
    let mut out = Vec::new();
    if all.contains("evo_lse") != twin {
        out.push(format!(
            "the evo_lse constant: expected {}",
            if twin { "`{1}`" } else { "none" }
        ));
    }
    if twin && !all.contains(".b8 evo_lse[4] = {1};") {
        out.push("evo_lse is not {1} (int[1] as 4 bytes)".into());
    }
    for entry in [ENTRY_FWD, ENTRY_COMBINE] {
        let (last, before) = last_params(all, entry);
        let ok = if twin {
            last == ".u64" && before == ".u32"
        } else {
            last == ".u32"
        };
        if !ok {
            out.push(format!(
                "{entry}'s last parameters are {before} {last}: expected {}",
                if twin {
                    "a pointer (float* lse) after an int"
                } else {
                    "an int"
                }
            ));
        }
    }
    out
}

/// The PTX types (`.u64`, `.u32`, ...) of the last two parameters of `entry`.
fn last_params<'a>(ptx: &'a str, entry: &str) -> (&'a str, &'a str) {
    let Some(start) = ptx.find(&format!(".entry {entry}(")) else {
        return ("", "");
    };
    let header = &ptx[start..];
    let header = &header[..header.find(')').unwrap_or(header.len())];
    let types: Vec<&str> = header
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip_while(|w| *w != ".param");
            words.next()?;
            // `.param .align 64 .b8 tm_q[128]` (a tensor map) or `.param .u64 name`.
            words.find(|w| w.starts_with('.') && *w != ".align" && !w.starts_with(".ptr"))
        })
        .collect();
    match types.as_slice() {
        [.., before, last] => (last, before),
        _ => ("", ""),
    }
}
