//! The lse twins of `evo gate`: each forward genome's kernels built again with
//! `EVO_LSE` = 1 (kernels/ABI.md, "The log-sum-exp output") and loaded beside the plain
//! ones, so that GREEN checks the forward's log-sum-exp on the kernels that write it
//! while every other launch, and every timing, stays on the plain kernels. A search
//! (crates/worker) builds no twins: its GREEN judges the plain kernels it times, and the
//! lse path is checked when a champion goes through `evo gate`.

use crate::compile::{compile_builds, BuiltVariant, KernelSource};
use crate::device::Device;
use crate::error::GateError;
use crate::family::KernelFamily;
use crate::kernel::AttentionKernel;
use evo_codegen::{Build, Toolchain};
use evo_genome::{Dtype, HeadDim, Target};

/// The lse twins of every source at every variant (none for a source without one,
/// [`KernelSource::has_lse_twin`]), in parallel; results per source, in order. `evo gate`
/// loads them beside the plain kernels ([`load_lse_twins`]) so that GREEN checks the
/// forward's log-sum-exp; a search (crates/worker) does not build them: its GREEN
/// judges the plain kernels, which are the ones it times.
pub fn compile_lse_twins(
    tc: &Toolchain,
    sources: &[KernelSource],
    variants: &[(HeadDim, Dtype)],
    target: Target,
) -> Vec<Vec<BuiltVariant>> {
    compile_builds(tc, sources, variants, target, Build::LseTwin)
}

/// Loads the lse twins ([`compile_lse_twins`]) of the variants `family` holds beside
/// them: GREEN then runs its lse launch on the twin. A twin that failed to compile
/// where its plain variant did not is an error naming both (the template's lse path is
/// broken for that variant).
pub fn load_lse_twins(
    device: &Device,
    family: &mut KernelFamily,
    twins: &[BuiltVariant],
) -> Result<(), GateError> {
    for v in twins {
        if family.variant(v.head_dim, v.dtype).is_none() {
            continue;
        }
        let name = family.name().to_string();
        match &v.result {
            Ok(c) => {
                let label = format!("{name} (D{} {}, lse twin)", v.head_dim, v.dtype);
                let twin = device.load_attention(&label, &c.cubin)?;
                family.add_lse_twin(v.head_dim, v.dtype, twin);
            }
            Err(e) => {
                return Err(GateError::Abi(format!(
                    "{name}: the lse twin of D{} {} (EVO_LSE=1) failed to compile while its \
                     plain kernel compiled: {e}",
                    v.head_dim, v.dtype
                )))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::compile_all;
    use evo_genome::Family;

    #[test]
    fn only_forward_genomes_have_lse_twins_and_theirs_declare_evo_lse() {
        let tc = Toolchain::discover().unwrap_or_else(|e| panic!("{e}"));
        let genome = |family| KernelSource::Genome {
            name: "g".into(),
            genome: evo_genome::Genome {
                family,
                ..evo_genome::Genome::baseline()
            },
        };
        let file = KernelSource::File {
            path: "k.cu".into(),
            text: "extern \"C\" __global__ void evo_attention_fwd() {}".into(),
        };
        let sources = [genome(Family::Ampere), file, genome(Family::AmpereBwd)];
        let has: Vec<bool> = sources.iter().map(KernelSource::has_lse_twin).collect();
        assert_eq!(has, [true, false, false]);
        let variants = [(HeadDim::D64, Dtype::F16)];
        let plain = compile_all(&tc, &sources[..1], &variants, Target::Sm90);
        let twins = compile_lse_twins(&tc, &sources, &variants, Target::Sm90);
        assert_eq!(twins.iter().map(Vec::len).collect::<Vec<_>>(), [1, 0, 0]);
        let ptx = |v: &BuiltVariant| {
            v.result
                .as_ref()
                .unwrap_or_else(|e| panic!("{e}"))
                .ptx
                .clone()
        };
        assert!(!ptx(&plain[0][0]).contains("evo_lse"));
        assert!(ptx(&twins[0][0]).contains(".b8 evo_lse[4] = {1};"));
    }
}
