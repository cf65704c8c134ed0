//! `evo compile`: one genome through the template and NVRTC, without a GPU.

use anyhow::Context;
use clap::{Args, ValueEnum};
use evo_codegen::{CodegenError, Compiled, Toolchain};
use evo_genome::{Dtype, GenomeFile, HeadDim, Target};
use std::path::PathBuf;

/// Compile a genome with NVRTC and print its defines, PTX or the ptxas resource report.
///
/// The genome is checked against the validity rules first; an invalid genome is
/// refused with every rule it breaks. No GPU is needed, only NVRTC: the headers
/// and libnvrtc are found under $EVO_NVRTC_DIR, $CUDA_HOME, /usr/local/cuda or the
/// repository's .nvrtc/ (which `.ci/run` installs).
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The genome file, e.g. genomes/v7a.toml.
    pub genome: PathBuf,

    /// GPU architecture to compile for: sm_89 (Ada, e.g. L4) or sm_90 (Hopper, e.g. H100).
    #[arg(long, default_value = "sm_90", value_parser = parse_target)]
    pub arch: Target,

    /// Head dimension the kernel is specialised for: 64, 96, 128 or 256.
    #[arg(long, default_value = "64", value_parser = parse_head_dim)]
    pub head_dim: HeadDim,

    /// Element type of Q, K, V and O: f16 or bf16.
    #[arg(long, default_value = "f16", value_parser = parse_dtype)]
    pub dtype: Dtype,

    /// What to print.
    #[arg(long, value_enum, default_value_t = Emit::Report)]
    pub emit: Emit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// Registers, spills, stack and static shared memory per kernel entry (ptxas -v).
    Report,
    /// The -D macro definitions that instantiate the template (no NVRTC needed).
    Defines,
    /// The PTX NVRTC generated.
    Ptx,
    /// The complete NVRTC log: warnings and the raw ptxas report.
    Log,
    /// Size and format of the CUBIN, and the exact NVRTC flags.
    CubinInfo,
}

pub fn parse_target(s: &str) -> Result<Target, String> {
    Target::parse(s).ok_or_else(|| format!("unknown architecture `{s}`; use sm_89 or sm_90"))
}

fn parse_head_dim(s: &str) -> Result<HeadDim, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number; use 64, 96, 128 or 256"))?;
    HeadDim::try_from(n)
}

fn parse_dtype(s: &str) -> Result<Dtype, String> {
    Dtype::ALL
        .into_iter()
        .find(|d| d.label() == s)
        .ok_or_else(|| format!("unknown dtype `{s}`; use f16 or bf16"))
}

pub fn run(args: CompileArgs) -> anyhow::Result<()> {
    let path = args.genome.display().to_string();
    let file = GenomeFile::load(&args.genome)?;
    let genome = file.genes;
    let (d, dtype, target) = (args.head_dim, args.dtype, args.arch);
    let violations = genome.violations(d, target);
    if !violations.is_empty() {
        return Err(CodegenError::Invalid(violations))
            .with_context(|| format!("{path}: genome `{}` at D{d} on {target}", file.name));
    }
    let compile = || -> anyhow::Result<(Toolchain, Compiled)> {
        let tc = Toolchain::discover().with_context(|| format!("cannot compile {path}"))?;
        let compiled =
            evo_codegen::compile_genome(&tc, &genome, d, dtype, target).with_context(|| {
                format!("{path}: genome `{}` at D{d} {dtype} on {target}", file.name)
            })?;
        Ok((tc, compiled))
    };
    match args.emit {
        Emit::Defines => print!("{}", evo_codegen::defines(&genome, d, dtype)),
        Emit::Ptx => print!("{}", compile()?.1.ptx),
        Emit::Log => print!("{}", compile()?.1.log),
        Emit::Report => {
            let (tc, compiled) = compile()?;
            print_report(&file, &path, &args, &tc, &compiled);
        }
        Emit::CubinInfo => print_cubin_info(&compile()?.1),
    }
    Ok(())
}

fn print_report(file: &GenomeFile, path: &str, args: &CompileArgs, tc: &Toolchain, c: &Compiled) {
    let g = &file.genes;
    println!(
        "{} ({path}), D{} {}, {}: {}",
        file.name,
        args.head_dim,
        args.dtype,
        args.arch,
        g.summary()
    );
    println!(
        "{}, template {} {}, compiled in {:.2} s",
        tc.label(),
        evo_codegen::template_for(g).0,
        evo_codegen::template_hash(),
        c.seconds
    );
    println!();
    print!("{}", c.report);
    println!();
    println!(
        "dynamic shared memory {} bytes (EVO_SMEM_BYTES), {} threads per CTA",
        g.smem(args.head_dim).total(),
        g.threads()
    );
    let warnings = c.log.lines().filter(|l| l.contains("warning")).count();
    if warnings > 0 {
        println!("NVRTC: {warnings} warning line(s); see --emit log");
    }
}

fn print_cubin_info(c: &Compiled) {
    // ELF machine 190 is EM_CUDA; bytes 18..20 hold e_machine, little-endian.
    let machine = c
        .cubin
        .get(18..20)
        .map(|b| u16::from_le_bytes([b[0], b[1]]));
    println!("cubin: {} bytes", c.cubin.len());
    println!(
        "format: {}",
        match (c.cubin.starts_with(b"\x7fELF"), machine) {
            (true, Some(190)) => "ELF, EM_CUDA".to_string(),
            (true, m) => format!("ELF, machine {m:?}"),
            (false, _) => "not an ELF image".to_string(),
        }
    );
    println!("nvrtc options: {}", c.options.join(" "));
}
