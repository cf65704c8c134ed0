//! The worker's side of the protocol: `evo worker` holds the device and answers.

use crate::protocol::{Hello, VariantFile, WorkerRequest};
use anyhow::Context;
use evo_gates::{Evaluation, Status};
use std::io::{BufRead, Write};
use std::path::Path;

/// The worker's side: hold the device, answer one request per line until stdin closes.
pub fn serve(stdin: impl BufRead, mut stdout: impl Write) -> anyhow::Result<()> {
    use evo_gates::{EvalOptions, FastOptions};
    // The device with the gates' verifier, which checks the timed launches.
    let opened = evo_gates::Device::open(0)
        .map_err(|e| e.to_string())
        .and_then(|device| {
            let tc = evo_codegen::Toolchain::discover().map_err(|e| e.to_string())?;
            evo_gates::compile::install_verifier(&tc, &device).map_err(|e| e.to_string())?;
            Ok(device)
        });
    let device = match opened {
        Ok(d) => d,
        Err(message) => {
            let hello = Hello::NoDevice { message };
            writeln!(stdout, "{}", serde_json::to_string(&hello)?)?;
            return Ok(());
        }
    };
    let hello = Hello::Ready {
        device: device.name().to_string(),
        target: device.target(),
    };
    // GREEN's inputs and CPU references, computed once per seed of the pool (see
    // `SEED_POOL`) and reused by every later candidate that draws the same seed.
    let mut references = evo_gates::green::GreenCache::default();
    let mut backward_references = evo_gates::backward::green::BackwardReferences::default();
    writeln!(stdout, "{}", serde_json::to_string(&hello)?)?;
    stdout.flush()?;
    for line in stdin.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let request: WorkerRequest = serde_json::from_str(&line)
            .with_context(|| format!("unreadable worker request: {line}"))?;
        let fast = if request.confirm {
            // A confirmation re-times on freshly allocated buffers.
            device.drop_spare_buffers();
            FastOptions::default().confirmation()
        } else {
            FastOptions::default()
        };
        let eval = if request.genome.pass() == evo_genome::Pass::Backward {
            serve_backward(&device, &request, &mut backward_references)
        } else {
            serve_one(
                &device,
                &request,
                &EvalOptions {
                    seed: request.seed,
                    fast,
                },
                &mut references,
            )
        };
        writeln!(stdout, "{}", serde_json::to_string(&eval)?)?;
        stdout.flush()?;
        if eval.status == Status::RuntimeFailed {
            // The context may be poisoned (a sticky fault): let the parent start afresh.
            return Ok(());
        }
    }
    Ok(())
}

fn serve_one(
    device: &evo_gates::Device,
    request: &WorkerRequest,
    options: &evo_gates::EvalOptions,
    references: &mut evo_gates::green::GreenCache,
) -> Evaluation {
    let mut family = evo_gates::KernelFamily::new(&request.name);
    match load_variants(device, request, |cubin| {
        device.load_attention(&request.name, cubin)
    }) {
        Ok(loaded) => {
            for (v, kernel) in loaded {
                family.add(v.head_dim, v.dtype, kernel);
            }
        }
        Err(failed) => return *failed,
    }
    evo_gates::evaluate(
        &mut family,
        &request.genome,
        device.name(),
        request.resources,
        &request.green_cases,
        &request.objective,
        options,
        references,
    )
}

/// A backward genome's request: its variants loaded as backward modules, then the
/// backward's GREEN and FAST (`evo_gates::backward::evaluate`).
fn serve_backward(
    device: &evo_gates::Device,
    request: &WorkerRequest,
    references: &mut evo_gates::backward::green::BackwardReferences,
) -> Evaluation {
    let variants = match load_variants(device, request, |cubin| {
        device.load_backward(&request.name, cubin)
    }) {
        Ok(loaded) => loaded
            .into_iter()
            .map(|(v, k)| ((v.head_dim, v.dtype), k))
            .collect(),
        Err(failed) => return *failed,
    };
    let mut kernel = evo_gates::backward::green::BackwardVariants {
        name: request.name.clone(),
        variants,
    };
    evo_gates::backward::evaluate::evaluate_backward(
        &mut kernel,
        &request.genome,
        device.name(),
        request.resources,
        &request.green_cases,
        &request.objective,
        request.seed,
        references,
    )
}

/// Each variant's CUBIN read and loaded by `load`, in the request's order; the first
/// that fails answers the whole request: `RuntimeFailed`, naming the error.
fn load_variants<'r, K>(
    device: &evo_gates::Device,
    request: &'r WorkerRequest,
    load: impl Fn(&[u8]) -> Result<K, evo_gates::GateError>,
) -> Result<Vec<(&'r VariantFile, K)>, Box<Evaluation>> {
    request
        .variants
        .iter()
        .map(|v| {
            read_cubin(&v.cubin)
                .and_then(|cubin| load(&cubin).map_err(anyhow::Error::from))
                .map(|k| (v, k))
                .map_err(|e| {
                    Box::new(Evaluation {
                        resources: request.resources,
                        ..Evaluation::failed(
                            request.genome,
                            device.name(),
                            Status::RuntimeFailed,
                            format!("module load failed: {e:#}"),
                        )
                    })
                })
        })
        .collect()
}

fn read_cubin(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{}: cannot read CUBIN", path.display()))
}
