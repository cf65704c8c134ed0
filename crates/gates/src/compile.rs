//! From a genome or a `.cu` file to a loaded [`KernelFamily`]: one NVRTC compile per
//! (head dim, dtype) the cases need, all compiles of a run done in parallel (rayon)
//! before the GPU part, then one module load per variant into the shared context.

use crate::baselines::SOFTMAX_SOURCE;
use crate::device::{Device, HybridKernel};
use crate::error::GateError;
use crate::family::KernelFamily;
use crate::outcome::Resources;
use evo_codegen::{
    compile_build, compile_source, Build, CodegenError, CompileOptions, Compiled, Defines,
    Toolchain,
};
use evo_genome::{Dtype, Family, Genome, HeadDim, Pass, Problem, Target};
use rayon::prelude::*;

/// What a kernel family is built from.
#[derive(Debug, Clone)]
pub enum KernelSource {
    /// A genome through the template (`name` from its TOML file).
    Genome { name: String, genome: Genome },
    /// A hand-written file under kernels/ABI.md.
    File { path: String, text: String },
}

impl KernelSource {
    pub fn name(&self) -> &str {
        match self {
            KernelSource::Genome { name, .. } => name,
            KernelSource::File { path, .. } => path,
        }
    }

    pub fn genome(&self) -> Option<&Genome> {
        match self {
            KernelSource::Genome { genome, .. } => Some(genome),
            KernelSource::File { .. } => None,
        }
    }

    /// The pass this source computes: a genome's, by its family; a hand-written file is
    /// a backward module when it declares `evo_pass` (kernels/ABI.md, "The backward
    /// ABI"; the runtime checks the value when it loads it), else a forward kernel.
    pub fn pass(&self) -> Pass {
        match self {
            KernelSource::Genome { genome, .. } => genome.pass(),
            KernelSource::File { text, .. } => {
                if declares_constant(text, evo_runtime::backward::PASS_SYMBOL) {
                    Pass::Backward
                } else {
                    Pass::Forward
                }
            }
        }
    }

    /// Why this source cannot be built at a head dim (a genome's violated rules).
    pub fn unsupported(&self, head_dim: HeadDim, target: Target) -> Option<String> {
        match self {
            KernelSource::Genome { genome, .. } => {
                let v = genome.violations(head_dim, target);
                (!v.is_empty()).then(|| {
                    format!(
                        "the genome is invalid at D{head_dim} on {target}: {}",
                        v.iter()
                            .map(|x| x.to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                })
            }
            // The first ABI (no `evo_abi` in the source) states the head dims it was
            // written for; the runtime refuses such a module at any other (kernels/ABI.md).
            KernelSource::File { text, .. } => {
                if text.contains(evo_runtime::abi::ABI_SYMBOL) {
                    None
                } else {
                    evo_runtime::abi::first_abi_refuses(head_dim)
                }
            }
        }
    }

    /// Whether the source has an lse twin to build: a forward genome does (kernels/ABI.md,
    /// "The log-sum-exp output"); a hand-written file's one module declares `evo_lse` or
    /// not, and a backward genome writes no lse.
    pub fn has_lse_twin(&self) -> bool {
        matches!(self, KernelSource::Genome { genome, .. } if genome.pass() == Pass::Forward)
    }

    fn compile(
        &self,
        tc: &Toolchain,
        head_dim: HeadDim,
        dtype: Dtype,
        target: Target,
        build: Build,
    ) -> Result<Compiled, CodegenError> {
        match self {
            KernelSource::Genome { genome, .. } => {
                compile_build(tc, genome, head_dim, dtype, target, build)
            }
            // A hand-written kernel may use wgmma or setmaxnreg: on sm_90 it is built for
            // sm_90a, which accepts everything plain sm_90 code does. Its own folder is on
            // the include path, so it may `#include "helpers.cuh"` kept beside it.
            KernelSource::File { path, text } => compile_source(
                tc,
                path,
                text,
                &abi_defines(head_dim, dtype),
                &CompileOptions {
                    arch_specific: target == Target::Sm90,
                    include_dirs: vec![source_folder(path)],
                    ..CompileOptions::new(target)
                },
            ),
        }
    }
}

/// True when a line of `text` declares the `__constant__` `symbol` outside a `//`
/// comment (a comment that names the symbol declares nothing, nor does a longer name).
fn declares_constant(text: &str, symbol: &str) -> bool {
    let ident = |c: char| c == '_' || c.is_ascii_alphanumeric();
    text.lines().any(|line| {
        let code = line.split("//").next().unwrap_or("");
        code.contains("__constant__")
            && code.match_indices(symbol).any(|(at, _)| {
                !code[..at].ends_with(ident) && !code[at + symbol.len()..].starts_with(ident)
            })
    })
}

/// The folder of a kernel file (`.` for a bare file name).
fn source_folder(path: &str) -> std::path::PathBuf {
    match std::path::Path::new(path).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// `n` genomes drawn uniformly from the valid space, of one family or of all, named
/// `sampleNNN-<id>`, reproducible from `seed`. A forward genome is valid at D64 and D128
/// (rejection sampling from the D64-valid ones); a backward family's, at D128 (its
/// split of dK and dV by columns has no D64 form, and is what makes D256 possible).
pub fn sample_sources(
    n: usize,
    seed: u64,
    target: Target,
    family: Option<Family>,
) -> Vec<KernelSource> {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let draw = |rng: &mut rand_chacha::ChaCha8Rng| match family {
        None => Some(evo_genome::space::sample_valid(rng, HeadDim::D64, target)),
        Some(f) if f.pass() == Pass::Backward => {
            evo_genome::space::sample_valid_in(rng, f, HeadDim::D128, target)
        }
        Some(f) => evo_genome::space::sample_valid_in(rng, f, HeadDim::D64, target),
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let genome = loop {
            let Some(g) = draw(&mut rng) else {
                return out;
            };
            if g.is_valid(HeadDim::D128, target) {
                break g;
            }
        };
        out.push(KernelSource::Genome {
            name: format!("sample{i:03}-{}", genome.id()),
            genome,
        });
    }
    out
}

/// The two macros every kernel under the ABI is compiled with.
pub fn abi_defines(head_dim: HeadDim, dtype: Dtype) -> Defines {
    Defines(vec![
        ("EVO_HEAD_DIM".into(), head_dim.get().to_string()),
        (
            "EVO_BF16".into(),
            u32::from(dtype == Dtype::Bf16).to_string(),
        ),
    ])
}

/// The (head dim, dtype) pairs a list of problems needs, in first-seen order.
pub fn variants_for(problems: &[Problem]) -> Vec<(HeadDim, Dtype)> {
    let mut out = Vec::new();
    for p in problems {
        if !out.contains(&(p.head_dim, p.dtype)) {
            out.push((p.head_dim, p.dtype));
        }
    }
    out
}

/// One compiled variant, or why there is none.
pub struct BuiltVariant {
    pub head_dim: HeadDim,
    pub dtype: Dtype,
    pub result: Result<Compiled, String>,
}

/// Compiles every source at every variant, in parallel; results per source, in order.
pub fn compile_all(
    tc: &Toolchain,
    sources: &[KernelSource],
    variants: &[(HeadDim, Dtype)],
    target: Target,
) -> Vec<Vec<BuiltVariant>> {
    compile_builds(tc, sources, variants, target, Build::Plain)
}

/// Compiles every source with a build of `build` at every variant (the lse twins: only
/// the sources that have one), in parallel; results per source, in order.
pub(crate) fn compile_builds(
    tc: &Toolchain,
    sources: &[KernelSource],
    variants: &[(HeadDim, Dtype)],
    target: Target,
    build: Build,
) -> Vec<Vec<BuiltVariant>> {
    let wanted = |s: usize| build == Build::Plain || sources[s].has_lse_twin();
    let jobs: Vec<(usize, HeadDim, Dtype)> = (0..sources.len())
        .filter(|&s| wanted(s))
        .flat_map(|s| variants.iter().map(move |&(d, t)| (s, d, t)))
        .collect();
    let built: Vec<(usize, BuiltVariant)> = jobs
        .par_iter()
        .map(|&(s, head_dim, dtype)| {
            let result = match sources[s].unsupported(head_dim, target) {
                Some(why) => Err(why),
                None => sources[s]
                    .compile(tc, head_dim, dtype, target, build)
                    .map_err(|e| e.to_string()),
            };
            (
                s,
                BuiltVariant {
                    head_dim,
                    dtype,
                    result,
                },
            )
        })
        .collect();
    let mut out: Vec<Vec<BuiltVariant>> = (0..sources.len()).map(|_| Vec::new()).collect();
    for (s, v) in built {
        out[s].push(v);
    }
    out
}

/// Loads the compiled variants into one family; variants that failed to compile are
/// left out (the caller reports them per case).
pub fn load_family(
    device: &Device,
    name: &str,
    built: &[BuiltVariant],
) -> Result<KernelFamily, GateError> {
    let mut family = KernelFamily::new(name);
    for v in built {
        if let Ok(c) = &v.result {
            let label = format!("{name} (D{} {})", v.head_dim, v.dtype);
            family.add(
                v.head_dim,
                v.dtype,
                device.load_attention(&label, &c.cubin)?,
            );
        }
    }
    Ok(family)
}

/// ptxas's figures for the forward kernel of a variant, with the launch's smem.
pub fn resources(compiled: &Compiled, smem_bytes: u32) -> Option<Resources> {
    compiled
        .report
        .kernel(crate::device::ENTRY_FWD)
        .map(|k| Resources {
            registers: k.registers,
            spill_stores: k.spill_stores,
            spill_loads: k.spill_loads,
            stack_frame: k.stack_frame,
            smem_bytes,
        })
}

/// The gates' own device code: input generator, reference softmax, row comparison.
pub const VERIFY_SOURCE: &str = include_str!("../../../kernels/verify.cu");

/// Compiles `kernels/verify.cu` for `target`.
pub fn compile_verifier(tc: &Toolchain, target: Target) -> Result<Compiled, GateError> {
    compile_source(
        tc,
        "verify.cu",
        VERIFY_SOURCE,
        &Defines(Vec::new()),
        &CompileOptions::new(target),
    )
    .map_err(|e| GateError::Compile(format!("the gates' verifier (kernels/verify.cu): {e}")))
}

/// Opens GPU `ordinal` ready to gate kernels: the gates' verifier compiled for its
/// target and installed (what GREEN's large cases and FAST check launches with).
pub fn gate_device(tc: &Toolchain, ordinal: usize) -> Result<Device, GateError> {
    let device = Device::open(ordinal)?;
    install_verifier(tc, &device)?;
    Ok(device)
}

/// Compiles the gates' verifier for `device` and installs it there.
pub fn install_verifier(tc: &Toolchain, device: &Device) -> Result<(), GateError> {
    let target = device.target().ok_or_else(|| {
        GateError::NoDevice(format!(
            "{} (compute capability {:?}) is not a GPU evo builds for (sm_89, sm_90)",
            device.name(),
            device.compute_capability()
        ))
    })?;
    device.install_verifier(&compile_verifier(tc, target)?.cubin)
}

/// Compiles the hybrid's softmax for both dtypes and builds the baseline on `device`.
pub fn cublas_hybrid(
    tc: &Toolchain,
    device: &Device,
    target: Target,
) -> Result<HybridKernel, GateError> {
    let mut cubins = Vec::new();
    for dtype in Dtype::ALL {
        let defines = Defines(vec![(
            "EVO_BF16".into(),
            u32::from(dtype == Dtype::Bf16).to_string(),
        )]);
        let compiled = compile_source(
            tc,
            "cublas_hybrid_softmax.cu",
            SOFTMAX_SOURCE,
            &defines,
            &CompileOptions::new(target),
        )
        .map_err(|e| GateError::Compile(e.to_string()))?;
        cubins.push((dtype, compiled.cubin));
    }
    device.cublas_hybrid(&cubins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn variants_are_deduplicated_in_order() {
        let cases = crate::suite::GreenSuite::Default.cases();
        let problems: Vec<Problem> = cases.iter().map(|c| c.problem).collect();
        let v = variants_for(&problems);
        assert_eq!(v.len(), 8, "every head dim in both dtypes");
        assert_eq!(v[0], (HeadDim::D64, Dtype::F16));
    }

    #[test]
    fn samples_are_valid_at_both_head_dims_and_reproducible() {
        let a = sample_sources(20, 4, Target::Sm90, None);
        let b = sample_sources(20, 4, Target::Sm90, None);
        assert_eq!(a.len(), 20);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.name(), y.name());
            let g = x.genome().unwrap();
            assert!(
                g.is_valid(HeadDim::D64, Target::Sm90) && g.is_valid(HeadDim::D128, Target::Sm90)
            );
        }
    }

    #[test]
    fn a_kernel_files_folder_is_its_include_path() {
        assert_eq!(
            source_folder("tests/kernels/naive.cu"),
            Path::new("tests/kernels")
        );
        assert_eq!(source_folder("naive.cu"), Path::new("."));
    }

    #[test]
    fn a_file_that_declares_evo_pass_is_a_backward_source() {
        let file = |text: &str| KernelSource::File {
            path: "k.cu".into(),
            text: text.into(),
        };
        let bwd = "extern \"C\" __constant__ int evo_pass[1] = {1};\n";
        assert_eq!(file(bwd).pass(), Pass::Backward);
        assert_eq!(
            file("extern \"C\" __constant__ int evo_geometry[6] = {64};").pass(),
            Pass::Forward
        );
        // Named in a comment, or a longer name: not a declaration.
        assert_eq!(
            file("// unlike a __constant__ evo_pass backward\n").pass(),
            Pass::Forward
        );
        for longer in ["evo_pass_count", "my_evo_pass"] {
            let text = format!("__constant__ int {longer}[1] = {{1}};");
            assert_eq!(file(&text).pass(), Pass::Forward, "{text}");
        }
        let genome = |family| KernelSource::Genome {
            name: "g".into(),
            genome: evo_genome::Genome {
                family,
                ..evo_genome::Genome::baseline()
            },
        };
        assert_eq!(genome(Family::Ampere).pass(), Pass::Forward);
        assert_eq!(genome(Family::AmpereBwd).pass(), Pass::Backward);
    }

    #[test]
    fn abi_defines_name_head_dim_and_dtype() {
        assert_eq!(
            abi_defines(HeadDim::D128, Dtype::Bf16).flags(),
            vec!["-DEVO_HEAD_DIM=128".to_string(), "-DEVO_BF16=1".to_string()]
        );
    }

    /// Needs NVRTC (as the codegen tests: `.ci/run` installs it), no GPU.
    #[test]
    fn the_verifier_compiles_for_every_target_with_every_entry_point() {
        let tc = Toolchain::discover().unwrap_or_else(|e| panic!("{e}"));
        for target in Target::ALL {
            let c = compile_verifier(&tc, target).unwrap_or_else(|e| panic!("{target}: {e}"));
            for entry in [
                "evo_draw",
                "evo_reference_softmax",
                "evo_compare_rows",
                "evo_gather_rows",
                "evo_check_guards",
            ] {
                assert!(
                    c.report.kernel(entry).is_some(),
                    "{target}: no {entry}\n{}",
                    c.log
                );
            }
            let compare = c.report.kernel("evo_compare_rows").unwrap();
            assert_eq!(compare.spill_stores, 0, "{target}: {}", c.log);
        }
    }

    /// Needs NVRTC (as the codegen tests: `.ci/run` installs it), no GPU.
    #[test]
    fn hand_written_kernels_and_the_hybrid_softmax_compile_for_every_variant() {
        let tc = Toolchain::discover().unwrap_or_else(|e| panic!("{e}"));
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kernels");
        let mut sources: Vec<KernelSource> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cu"))
            .map(|p| KernelSource::File {
                path: p.display().to_string(),
                text: std::fs::read_to_string(&p).unwrap(),
            })
            .collect();
        sources.sort_by(|a, b| a.name().cmp(b.name()));
        assert!(sources.len() >= 8);
        let variants: Vec<(HeadDim, Dtype)> = HeadDim::ALL
            .iter()
            .flat_map(|&d| Dtype::ALL.iter().map(move |&t| (d, t)))
            .collect();
        let (backward, forward): (Vec<KernelSource>, Vec<KernelSource>) = sources
            .into_iter()
            .partition(|s| s.pass() == Pass::Backward);
        for s in &backward {
            assert!(
                s.name().contains("/bwd_"),
                "{}: declares evo_pass",
                s.name()
            );
        }
        for (source, built) in
            forward
                .iter()
                .zip(compile_all(&tc, &forward, &variants, Target::Sm90))
        {
            assert!(
                !source.name().contains("/bwd_"),
                "{}: no evo_pass",
                source.name()
            );
            for v in built {
                // The hand-written kernels are of the first ABI: D64 and D128 only.
                let first_abi = HeadDim::FIRST_ABI.contains(&v.head_dim);
                if !first_abi {
                    let why = v
                        .result
                        .expect_err("a first-ABI file is not built at D96/D256");
                    assert!(why.contains("first ABI"), "{why}");
                    continue;
                }
                let c = v.result.unwrap_or_else(|e| {
                    panic!("{} D{} {}: {e}", source.name(), v.head_dim, v.dtype)
                });
                let r = resources(&c, 0).unwrap_or_else(|| {
                    panic!(
                        "{}: no ptxas figures for {}",
                        source.name(),
                        crate::device::ENTRY_FWD
                    )
                });
                assert!(r.registers > 0);
            }
        }
        // The backward modules are of the second ABI, with the four kernels of the
        // backward ABI. bwd_naive.cu is built at every head dim and dtype on every target;
        // the defective variants, which share its code (bwd_scalar.cuh) and differ in a
        // line or two, at two corners (D64 f16 on sm_90, D128 bf16 on sm_89), which keeps
        // CI's compiles at 30 instead of 128.
        assert!(
            backward.len() >= 8,
            "bwd_naive.cu and seven defective variants"
        );
        let (naive, defective): (Vec<KernelSource>, Vec<KernelSource>) = backward
            .into_iter()
            .partition(|s| s.name().ends_with("bwd_naive.cu"));
        assert_eq!(naive.len(), 1, "tests/kernels/bwd_naive.cu");
        type Job<'a> = (&'a [KernelSource], Vec<(HeadDim, Dtype)>, Target);
        let mut jobs: Vec<Job> = Target::ALL
            .iter()
            .map(|&t| (naive.as_slice(), variants.clone(), t))
            .collect();
        jobs.push((&defective, vec![(HeadDim::D64, Dtype::F16)], Target::Sm90));
        jobs.push((&defective, vec![(HeadDim::D128, Dtype::Bf16)], Target::Sm89));
        for (sources, variants, target) in jobs {
            for (source, built) in sources
                .iter()
                .zip(compile_all(&tc, sources, &variants, target))
            {
                for v in built {
                    let c = v.result.unwrap_or_else(|e| {
                        panic!(
                            "{} D{} {} {target}: {e}",
                            source.name(),
                            v.head_dim,
                            v.dtype
                        )
                    });
                    for entry in [
                        evo_codegen::ENTRY_BWD_PRE,
                        evo_codegen::ENTRY_BWD,
                        evo_codegen::ENTRY_BWD_DQ,
                        evo_codegen::ENTRY_BWD_POST,
                    ] {
                        assert!(
                            c.report.kernel(entry).is_some(),
                            "{} {target}: no {entry}\n{}",
                            source.name(),
                            c.log
                        );
                    }
                }
            }
        }
        for dtype in Dtype::ALL {
            let defines = Defines(vec![(
                "EVO_BF16".into(),
                u32::from(dtype == Dtype::Bf16).to_string(),
            )]);
            let c = compile_source(
                &tc,
                "softmax.cu",
                SOFTMAX_SOURCE,
                &defines,
                &CompileOptions::new(Target::Sm90),
            )
            .unwrap();
            assert!(
                c.report.kernel(crate::device::ENTRY_SOFTMAX).is_some(),
                "{}",
                c.log
            );
        }
    }
}
