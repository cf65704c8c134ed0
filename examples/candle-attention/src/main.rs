//! Runs an evo export's champion on candle CUDA tensors through [`EvoAttention`] and
//! checks the output against candle's own attention computed in f32, under the
//! tolerances GREEN holds every kernel to (the export's manifest records them).
//!
//! ```sh
//! evo-candle-attention out/h100                                  # B1 H8 L512 D64 f16
//! evo-candle-attention out/h100 --shape 2,16,4096,128 --dtype bf16 --causal
//! ```
//!
//! Exit status 0 when the output is within tolerance, 1 when it is not or when anything
//! could not run (the candle error says what).

use candle_core::cuda_backend::cudarc;
use candle_core::{DType, Device, Error, Result, Tensor};
use clap::Parser;
use evo_candle_attention::{reference, EvoAttention};
use std::path::PathBuf;
use std::process::ExitCode;

/// Run an evo export's champion on candle CUDA tensors and check it against candle's
/// attention in f32.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The folder `evo export OUT --champions genomes/champions/h100` wrote.
    export: PathBuf,
    /// `B,H,L,D`, or `B,H,Lq,Lk,D` for keys of another length than the queries.
    #[arg(long, default_value = "1,8,512,64", value_parser = parse_shape)]
    shape: [usize; 5],
    /// f16 or bf16 (another candle dtype, f32 say, shows the op's refusal).
    #[arg(long, default_value = "f16")]
    dtype: DType,
    /// Mask key j from query i when j > i (top-left aligned, as PyTorch's is_causal).
    #[arg(long)]
    causal: bool,
    /// The CUDA device's ordinal.
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Give candle's device a stream of its own (`Device::new_cuda_with_stream`) instead
    /// of the legacy default stream: the op then launches on that stream.
    #[arg(long)]
    own_stream: bool,
    /// Make q a [B, L, H, D] tensor transposed to [B, H, L, D], a strided view, to see
    /// the op refuse it.
    #[arg(long)]
    strided_q: bool,
    /// Seed of candle's random q, k and v (standard normal, as GREEN's inputs).
    #[arg(long, default_value_t = 2026)]
    seed: u64,
}

fn parse_shape(text: &str) -> std::result::Result<[usize; 5], String> {
    let dims = text
        .split(',')
        .map(|n| n.trim().parse::<usize>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("`{text}`: {e}; write B,H,L,D or B,H,Lq,Lk,D"))?;
    match dims[..] {
        [b, h, l, d] => Ok([b, h, l, l, d]),
        [b, h, lq, lk, d] => Ok([b, h, lq, lk, d]),
        _ => Err(format!(
            "`{text}` has {} numbers; write B,H,L,D or B,H,Lq,Lk,D",
            dims.len()
        )),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// True when the champion's output is within the export's tolerances.
fn run(args: &Args) -> Result<bool> {
    let op = EvoAttention::open(&args.export, args.causal)?;
    let export = op.champions().export();
    let manifest = export.manifest();
    println!(
        "export {}: {} champions of {} ({}), evo {}, NVRTC {}",
        args.export.display(),
        manifest.champions.len(),
        manifest.device,
        manifest.arch,
        manifest.evo_version,
        manifest.nvrtc_version
    );

    check_cuda_libraries()?;
    let device = if args.own_stream {
        Device::new_cuda_with_stream(args.gpu)
    } else {
        Device::new_cuda(args.gpu)
    }
    .map_err(|e| Error::msg(format!("cannot open CUDA device {}: {e}", args.gpu)))?;
    device.set_seed(args.seed)?;
    let [b, h, lq, lk, d] = args.shape;
    let randn = |dims: (usize, usize, usize, usize)| {
        Tensor::randn(0f32, 1f32, dims, &device).and_then(|t| t.to_dtype(args.dtype))
    };
    let q = if args.strided_q {
        randn((b, lq, h, d))?.transpose(1, 2)?
    } else {
        randn((b, h, lq, d))?
    };
    let (k, v) = (randn((b, h, lk, d))?, randn((b, h, lk, d))?);

    let o = op.forward(&q, &k, &v)?;
    let p = op.problem(&q, &k, &v)?;
    let (champion, kernel) = export.choose(&p).map_err(Error::wrap)?;
    println!(
        "{}: champion `{}` ({} family, genome {} {}), {} kernel{}",
        p.spec(),
        champion.class,
        champion.family,
        champion.genome,
        champion.genome_id,
        kernel.arch,
        if kernel.cubin.is_some() {
            ", CUBIN"
        } else {
            ", PTX"
        }
    );

    let expected = reference::attention(&q, &k, &v, args.causal)?;
    let (max_abs, rel_frob) = reference::errors(&o, &expected)?;
    let Some(tolerance) = manifest.tolerances.iter().find(|t| t.dtype == p.dtype) else {
        candle_core::bail!(
            "{} records no GREEN tolerance for {}; export it again with this evo",
            args.export.join("manifest.json").display(),
            p.dtype
        )
    };
    let pass = max_abs <= tolerance.max_abs && rel_frob <= tolerance.rel_frob;
    println!(
        "against candle's f32 attention: max abs error {max_abs:.3e} (tolerance {:.1e}), \
         relative Frobenius error {rel_frob:.3e} (tolerance {:.1e})",
        tolerance.max_abs, tolerance.rel_frob
    );
    println!(
        "{}: {} {}",
        if pass { "PASS" } else { "FAIL" },
        p.spec(),
        if pass {
            "is within GREEN's tolerances"
        } else {
            "is outside GREEN's tolerances"
        }
    );
    Ok(pass)
}

/// candle's CUDA device loads these when it is created; missing, cudarc would panic
/// there, so their absence is an error here first, naming what to install.
fn check_cuda_libraries() -> Result<()> {
    // SAFETY (each call): it only asks the dynamic loader for the library by the names
    // cudarc would load it by; no symbol is called.
    let libraries = [
        ("libcuda (the NVIDIA driver)", unsafe {
            cudarc::driver::sys::is_culib_present()
        }),
        ("libcublas", unsafe {
            cudarc::cublas::sys::is_culib_present()
        }),
        ("libcublasLt", unsafe {
            cudarc::cublaslt::sys::is_culib_present()
        }),
        ("libcurand", unsafe {
            cudarc::curand::sys::is_culib_present()
        }),
    ];
    let missing: Vec<&str> = libraries
        .iter()
        .filter(|(_, present)| !present)
        .map(|(name, _)| *name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    candle_core::bail!(
        "no CUDA device: the dynamic loader cannot find {}; run on a machine with an \
         NVIDIA GPU and driver, with the CUDA 13 toolkit's lib64 on LD_LIBRARY_PATH",
        missing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_is_four_or_five_lengths() {
        assert_eq!(parse_shape("1,8,512,64"), Ok([1, 8, 512, 512, 64]));
        assert_eq!(
            parse_shape("2, 8, 77, 1000, 128"),
            Ok([2, 8, 77, 1000, 128])
        );
        assert!(parse_shape("1,8,512").unwrap_err().contains("3 numbers"));
        assert!(parse_shape("1,8,x,64").unwrap_err().contains("B,H,L,D"));
    }
}
