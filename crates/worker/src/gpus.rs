//! Which GPUs a search runs on: `--gpus`, pinning a worker to one GPU, one model only.

use anyhow::{bail, Context};

/// The `CUDA_VISIBLE_DEVICES` value for GPU `ordinal` of this process's GPUs: under a
/// scheduler that already narrowed them (`visible`, e.g. Slurm's `2,5`), the ordinal
/// counts within that list.
pub(crate) fn pin(visible: Option<&str>, ordinal: u32) -> anyhow::Result<String> {
    match visible.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(ordinal.to_string()),
        Some(list) => {
            let ids: Vec<&str> = list.split(',').map(str::trim).collect();
            ids.get(ordinal as usize)
                .map(|id| id.to_string())
                .with_context(|| {
                    format!(
                        "--gpus asks for GPU {ordinal}, but CUDA_VISIBLE_DEVICES={list} shows {} GPU(s), numbered from 0",
                        ids.len()
                    )
                })
        }
    }
}

/// The GPUs of `--gpus`: `all`, or ordinals such as `0,1`.
pub fn parse_gpus(spec: &str) -> anyhow::Result<Vec<u32>> {
    if spec.trim() == "all" {
        let count = match std::env::var("CUDA_VISIBLE_DEVICES") {
            Ok(list) if !list.trim().is_empty() => list.split(',').count(),
            _ => std::fs::read_dir("/proc/driver/nvidia/gpus").map_or(0, |d| d.count()),
        };
        if count == 0 {
            bail!("--gpus all: the NVIDIA driver reports no GPU on this machine");
        }
        return Ok((0..count as u32).collect());
    }
    let mut gpus = Vec::new();
    for part in spec.split(',') {
        let ordinal: u32 = part.trim().parse().with_context(|| {
            format!("--gpus {spec}: `{part}` is not a GPU ordinal; use `all` or a list such as 0,1")
        })?;
        if gpus.contains(&ordinal) {
            bail!("--gpus {spec}: GPU {ordinal} is named twice");
        }
        gpus.push(ordinal);
    }
    Ok(gpus)
}

/// Refuses GPUs of more than one model (`(ordinal, device name)`): the timings of a
/// `what` (a search, a gate) on two models would not compare.
pub fn require_one_model(what: &str, models: &[(u32, String)]) -> anyhow::Result<()> {
    if models.iter().any(|(_, m)| *m != models[0].1) {
        let list = models
            .iter()
            .map(|(g, m)| format!("GPU {g}: {m}"))
            .collect::<Vec<_>>()
            .join(", ");
        bail!(
            "one {what} runs on one GPU model, or its timings would not compare ({list}); pick GPUs of one model with --gpus"
        );
    }
    Ok(())
}
