//! The cluster merge's exit (`cluster_combine = "on"`), read in the PTX: no CTA of a
//! cluster may leave while the cluster can still touch its shared memory, so every path
//! of the forward kernel to its `ret` ends on a cluster barrier that every thread arrives
//! at and then waits on (`evo_cluster::leave`, kernels/cluster.cuh). The early exit this
//! guards against — warpgroups that arrived on the first phase and left without a
//! wait — passes GREEN by luck on the GPU, so it is caught here, where it is certain.
//! Needs NVRTC, like tests/compile.rs (no GPU).

mod common;

use common::{fa3, fwd_ptx, toolchain};
use evo_codegen::compile_many;
use evo_genome::{
    ConsumerWgs, Dtype, Genome, HeadDim, Overlap, SplitKv, Stages, Switch, Target, WgSplit,
};

/// A path's cluster barriers so far: arrivals made (capped at two) and whether the last
/// barrier instruction was an arrival still to be waited on.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Phase {
    arrivals: u8,
    pending: bool,
}

/// What is wrong with the forward kernel's cluster barriers, read over its control-flow
/// graph: every path from the entry to a `ret` must have arrived twice (the first phase
/// after the barriers' initialisation, the second at the exit: `evo_cluster::leave`) and
/// end on a wait after its last arrival. The graph knows no values, so it also walks paths
/// the kernel never takes (a first-phase wait skipped or repeated in the tile loop); the
/// pairing of each arrival with one wait is not checked, only the exit. Labels and
/// branches inside inline assembly (`WAIT_CLUSTER` loops, not the compiler's `$L__`
/// blocks) stay within one block.
fn cluster_barrier_faults(ptx: &str) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    let lines: Vec<&str> = ptx
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect();
    let label_at: HashMap<&str, usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("$L__") && l.ends_with(':'))
        .map(|(i, l)| (l.trim_end_matches(':'), i))
        .collect();
    let mut faults = HashSet::new();
    let mut seen: HashSet<(usize, Phase)> = HashSet::new();
    let entry = lines.iter().position(|l| *l == "{").map_or(0, |p| p + 1);
    let mut work = vec![(
        entry,
        Phase {
            arrivals: 0,
            pending: false,
        },
    )];
    while let Some((mut at, mut phase)) = work.pop() {
        while at < lines.len() {
            if !seen.insert((at, phase)) {
                break;
            }
            let line = lines[at];
            if line.starts_with("barrier.cluster.arrive") {
                phase = Phase {
                    arrivals: (phase.arrivals + 1).min(2),
                    pending: true,
                };
            } else if line.starts_with("barrier.cluster.wait") {
                phase.pending = false;
            } else if line.starts_with("ret;") || line.starts_with("exit;") {
                if phase.arrivals < 2 || phase.pending {
                    faults.insert(format!(
                        "PTX line {at}: `{line}` reached after {} arrival(s){}: the CTA may leave \
                         while its cluster still uses its shared memory",
                        phase.arrivals,
                        if phase.pending {
                            ", the last not waited on"
                        } else {
                            ""
                        }
                    ));
                }
                break;
            } else if line.contains("bra") {
                let target = line
                    .rsplit(|c: char| c.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .trim_end_matches(';');
                if let Some(&to) = label_at.get(target) {
                    work.push((to, phase));
                    if !line.starts_with('@') {
                        break; // unconditional: no fall-through
                    }
                }
            } else if line.starts_with('@') && line.contains("ret") {
                faults.insert(format!("PTX line {at}: a predicated `ret` (not read here)"));
            }
            at += 1;
        }
    }
    let mut faults: Vec<String> = faults.into_iter().collect();
    faults.sort();
    faults
}

#[test]
fn every_exit_of_a_cluster_merge_kernel_waits_for_its_cluster() {
    let fa3 = fa3();
    let cluster = |persistent, keys| Genome {
        split_kv: SplitKv::K2,
        cluster_combine: Switch::On,
        persistent,
        wg_split: if keys { WgSplit::Keys } else { fa3.wg_split },
        consumer_wgs: ConsumerWgs::C2,
        stages: Stages::S2,
        softmax_overlap: Overlap::On,
        ..fa3
    };
    // The plain cluster merge, on a grid of one tile per CTA and on a persistent one, and
    // the keys split with its merge (warpgroups 1.. never merge in the cluster: the path
    // that left without a wait).
    let genomes = [
        cluster(Switch::Off, false),
        cluster(Switch::On, false),
        cluster(Switch::Off, true),
        cluster(Switch::On, true),
    ];
    let jobs: Vec<_> = genomes
        .iter()
        .filter(|g| g.is_valid(HeadDim::D64, Target::Sm90))
        .map(|g| (*g, HeadDim::D64, Dtype::F16, Target::Sm90))
        .collect();
    assert_eq!(
        jobs.len(),
        genomes.len(),
        "every cluster genome here is valid"
    );
    let mut failures = Vec::new();
    for ((g, ..), compiled) in jobs.iter().zip(compile_many(toolchain(), &jobs)) {
        let compiled = compiled.unwrap_or_else(|e| panic!("{}: {e}", g.summary()));
        let ptx = fwd_ptx(&compiled.ptx);
        assert!(
            ptx.contains("barrier.cluster.arrive"),
            "{}: no cluster barrier at all: the genome does not merge in a cluster",
            g.summary()
        );
        for problem in cluster_barrier_faults(ptx) {
            failures.push(format!("{}: {problem}", g.summary()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_exit_check_catches_a_kernel_that_leaves_after_an_arrive_only() {
    // A kernel as the template was before `leave`: the producer waits on the first phase
    // and returns; a consumer warpgroup that never merges returns after its arrival.
    let early = "{
barrier.cluster.arrive.release.aligned;
@%p1 bra $L__BB0_9;
barrier.cluster.wait.acquire.aligned;
ret;
$L__BB0_9:
st.global.u32 [%rd1], %r1;
ret;
}";
    let faults = cluster_barrier_faults(early);
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].contains("after 1 arrival(s):"), "{faults:?}");
    assert!(faults[1].contains("the last not waited on"), "{faults:?}");
    // The same two paths through one shared exit that arrives and waits again (with the
    // first phase waited on where it was not), and a loop around a merge.
    let safe = "{
barrier.cluster.arrive.release.aligned;
@%p1 bra $L__BB0_9;
barrier.cluster.wait.acquire.aligned;
bra.uni $L__BB0_10;
$L__BB0_9:
barrier.cluster.wait.acquire.aligned;
$L__BB0_8:
st.global.u32 [%rd1], %r1;
@%p2 bra $L__BB0_8;
$L__BB0_10:
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
ret;
}";
    assert_eq!(cluster_barrier_faults(safe), Vec::<String>::new());
}
