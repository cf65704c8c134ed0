//! The cost model as the commands train it: `--model-data DIR`, the recorded
//! evaluations under it, never the records of the shape being searched or judged; and
//! `evo model`, which says what it learns from and how well it predicts.

use anyhow::Context;
use evo_costmodel::{
    leave_one_shape_out, ForestSource, RecordsError, Selection, TrainingSet, SNAPSHOT_SUFFIX,
};
use evo_genome::{Pass, Problem};
use evo_lineage::write_atomic;
use evo_mutator::ModelHandle;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the records live by default: this repository's experiments.
pub const DEFAULT_MODEL_DATA: &str = "experiments";

/// Trains the model for a search of `problem` on `device`: the records of this device
/// (of every device when this one has none, said on stderr) for `pass`, leaving out
/// `problem` and the shapes of `leave_out`.
pub fn train(
    data: &Path,
    device: &str,
    pass: Pass,
    problem: Problem,
    leave_out: &[Problem],
) -> anyhow::Result<ModelHandle> {
    let mut selection = Selection {
        device: Some(device.to_string()),
        pass,
        leave_out: std::iter::once(problem)
            .chain(leave_out.iter().copied())
            .collect(),
    };
    let set = match TrainingSet::load(data, &selection) {
        Err(RecordsError::Empty { .. }) => {
            eprintln!(
                "cost model: no records of `{device}` under {}; training on every device's records",
                data.display()
            );
            selection.device = None;
            TrainingSet::load(data, &selection)
        }
        other => other,
    }
    .context("--model-data")?;
    let source = ForestSource::train(&set, problem)?;
    Ok(ModelHandle::new(source))
}

/// `evo model`: what the cost model learns from, and how well it predicts a shape it
/// never saw.
#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    /// The recorded evaluations to learn from: a folder (every `*.jsonl` and `*.jsonl.gz`
    /// under it) or one file.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MODEL_DATA)]
    pub model_data: PathBuf,
    /// Only the records of this device, as the driver names it [default: every device's].
    #[arg(long)]
    pub device: Option<String>,
    /// The pass whose kernels' records to read.
    #[arg(long, default_value = "forward", value_parser = ["forward", "backward"])]
    pub pass: String,
    /// Hold out, in turn, each shape with at least this many recorded genomes: a forest
    /// trained on the other shapes ranks it.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub min_rows: usize,
    /// Write the rows the model learns from (each genome once per shape, at the median of
    /// its measurements) to this gzipped JSON-lines file: a snapshot that fixes what a
    /// model learns from (`--model-data FILE`), whatever is recorded later.
    #[arg(long, value_name = "FILE.snapshot.jsonl.gz")]
    pub snapshot: Option<PathBuf>,
    /// Replace the --snapshot file when it exists.
    #[arg(long, requires = "snapshot")]
    pub force: bool,
}

pub fn run(args: ModelArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.snapshot {
        if !path.to_string_lossy().ends_with(SNAPSHOT_SUFFIX) {
            anyhow::bail!(
                "--snapshot {}: name a `*{SNAPSHOT_SUFFIX}` file (a folder's walk passes over such files, which repeat the records beside them; --model-data names one to read it)",
                path.display()
            );
        }
        super::check_new_file(path, args.force, "--snapshot")?;
    }
    let selection = Selection {
        device: args.device.clone(),
        pass: if args.pass == "backward" {
            Pass::Backward
        } else {
            Pass::Forward
        },
        leave_out: Vec::new(),
    };
    let set = TrainingSet::load(&args.model_data, &selection).context("--model-data")?;
    println!(
        "{} recorded genomes on {}, from {} under {}",
        set.rows.len(),
        evo_costmodel::count(set.shapes, "shape"),
        evo_costmodel::count(set.files, "record file"),
        args.model_data.display()
    );
    if let Some(path) = &args.snapshot {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        for row in &set.rows {
            serde_json::to_writer(&mut gz, &row.to_evaluation())?;
            gz.write_all(b"\n")?;
        }
        write_atomic(path, &gz.finish()?)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        println!("wrote {}", path.display());
    }
    let held = leave_one_shape_out(&set, args.min_rows)?;
    if held.is_empty() {
        println!(
            "no shape has {} recorded genomes to hold out",
            args.min_rows
        );
        return Ok(());
    }
    println!("\nEach shape held out in turn, ranked by a forest trained on the other shapes:\n");
    println!("| held-out shape | genomes | Spearman ρ | first pick / best | best of the first 10 / best |");
    println!("|---|---:|---:|---:|---:|");
    for h in &held {
        println!(
            "| {} | {} | {} | {:.2} | {:.2} |",
            h.shape,
            h.rows,
            h.spearman.map_or("—".into(), |r| format!("{r:.2}")),
            h.first_pick_over_best,
            h.best_of_ten_over_best
        );
    }
    Ok(())
}
