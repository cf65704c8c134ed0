//! `evo bench --champions DIR --backward`: the dispatch table's backward genomes (its
//! `[[backward]]` entries, one per head dim) on the shapes of the classes they serve,
//! against PyTorch's backward kernels.
//!
//! Each backward genome goes through `evo gate`'s backward machinery
//! (`gate/backward.rs`): GREEN's backward checks on the quick suite's cases of its head
//! dim, then FAST's warm and cold-L2 timing, every timed call checked, on each class it
//! serves. PyTorch's cuDNN and flash backward kernels run last
//! (scripts/sdpa_backward_baseline.py), after this process has let the GPU go, on the
//! same problems; a broken torch costs the baselines, never evo's rows. Nothing is
//! recorded into the table: its backward entries hold no figures.

use super::backward_table::{backward_table, class_row, BackwardChampion, ClassRow, BACKENDS};
use super::BenchArgs;
use crate::commands::gate::backward::{gate_kernels, BackwardOutcome, BackwardRun};
use anyhow::{bail, Context};
use evo_codegen::Toolchain;
use evo_gates::baselines::SdpaResult;
use evo_gates::compile::KernelSource;
use evo_gates::suite::Case;
use evo_gates::{Device, GreenSuite};
use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::{Dtype, Genome, GenomeFile, HeadDim, Pass, Problem};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// A class of the table and the backward genome (an index into the champions) that
/// serves its head dim, if any.
struct PlannedClass {
    name: String,
    problem: Problem,
    champion: Option<usize>,
}

/// The run: every class, and the backward genomes that serve them.
struct Plan {
    classes: Vec<PlannedClass>,
    /// In the `[[backward]]` entries' order, only those some class uses.
    champions: Vec<BackwardChampion>,
    /// `champions[i]`'s genes.
    genomes: Vec<Genome>,
}

/// What `--json` holds: the table's rows, each genome's gate, the script's rows.
#[derive(Serialize)]
struct BackwardBench<'a> {
    device: &'a str,
    dtype: &'a str,
    run_seed: u64,
    champions: &'a [BackwardChampion],
    classes: &'a [ClassRow],
    evo: Vec<&'a BackwardOutcome>,
    sdpa: &'a [SdpaResult],
}

/// The classes in `dtype` and the backward genomes (`files`: the entries') that serve them.
fn plan(table: &DispatchTable, files: &[GenomeFile], dtype: Dtype) -> anyhow::Result<Plan> {
    let mut used = vec![false; table.backward.len()];
    let mut classes = Vec::new();
    for c in &table.classes {
        let problem = Problem {
            dtype,
            ..c.problem().map_err(|e| anyhow::anyhow!("{e}"))?
        };
        let entry = table
            .backward
            .iter()
            .position(|b| b.serves().contains(&(problem.head_dim.get(), dtype)));
        if let Some(e) = entry {
            used[e] = true;
        }
        classes.push((c.name.clone(), problem, entry));
    }
    // Entry index -> champion index.
    let mut index = vec![None; table.backward.len()];
    let mut champions = Vec::new();
    let mut genomes = Vec::new();
    for (e, (entry, file)) in table.backward.iter().zip(files).enumerate() {
        if used[e] {
            index[e] = Some(champions.len());
            champions.push(BackwardChampion {
                kernel: format!("backward {}", entry.label()),
                file: entry.genome.clone(),
                genome_id: file.genes.id().to_string(),
                summary: file.genes.summary(),
                origin: entry.origin.clone(),
            });
            genomes.push(file.genes);
        }
    }
    let classes = classes
        .into_iter()
        .map(|(name, problem, entry)| PlannedClass {
            name,
            problem,
            champion: entry.and_then(|e| index[e]),
        })
        .collect();
    Ok(Plan {
        classes,
        champions,
        genomes,
    })
}

/// The table's rows: every class, with its genome's outcome where it was gated.
fn rows_of(
    classes: &[PlannedClass],
    champions: &[BackwardChampion],
    outcomes: &[Option<BackwardOutcome>],
    sdpa: &[SdpaResult],
) -> Vec<ClassRow> {
    classes
        .iter()
        .map(|c| {
            let champion = c.champion.map(|i| &champions[i]);
            let outcome = c.champion.and_then(|i| outcomes[i].as_ref());
            class_row(&c.name, &c.problem, champion, outcome, sdpa)
        })
        .collect()
}

/// GREEN's cases for a backward genome of head dim `d`: the quick suite's at that head
/// dim; where the quick suite has none (D96), the default suite's, so that no genome is
/// timed unchecked. The name of the suite the cases come from is returned with them.
fn green_cases(d: HeadDim) -> (Vec<Case>, &'static str) {
    let at_d = |suite: GreenSuite| -> Vec<Case> {
        suite
            .cases()
            .into_iter()
            .filter(|c| c.problem.head_dim == d)
            .collect()
    };
    let quick = at_d(GreenSuite::Quick);
    if quick.is_empty() {
        (at_d(GreenSuite::Default), "default")
    } else {
        (quick, "quick")
    }
}

pub fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    let dtype = super::dtype_of(&args.dtype);
    let (table, _) = crate::commands::champions::load_table(dir)?;
    let path = dir.join(DISPATCH_FILE);
    let files = table.load_backward(dir, &path)?;
    let Plan {
        classes,
        champions,
        genomes,
    } = plan(&table, &files, dtype)?;
    if champions.is_empty() {
        bail!(
            "{}: no [[backward]] entry serves the head dims of its classes in {dtype} (it has \
             {} backward entries); add one per head dim, as genomes/champions/h100/{DISPATCH_FILE} \
             does",
            path.display(),
            table.backward.len()
        );
    }
    let device = Device::open(0)?;
    let target = crate::commands::device_target(&device)?;
    let tc = Toolchain::discover()?;
    evo_gates::compile::install_verifier(&tc, &device)?;
    let dev = device.name().to_string();
    eprintln!(
        "backward: {} genomes on {} of the {} classes ({dtype}); GPU: {dev}",
        champions.len(),
        classes.iter().filter(|c| c.champion.is_some()).count(),
        classes.len()
    );

    let write_json = |rows: &[ClassRow], outcomes: &[Option<BackwardOutcome>], sdpa: &[_]| {
        let Some(json) = &args.json else {
            return Ok(());
        };
        let bench = BackwardBench {
            device: &dev,
            dtype: &args.dtype,
            run_seed: args.seed,
            champions: &champions,
            classes: rows,
            evo: outcomes.iter().flatten().collect(),
            sdpa,
        };
        evo_lineage::write_atomic(json, serde_json::to_string_pretty(&bench)?.as_bytes())
            .with_context(|| format!("{}: cannot write", json.display()))
    };
    let mut outcomes: Vec<Option<BackwardOutcome>> = vec![None; champions.len()];
    for (i, (champion, genome)) in champions.iter().zip(&genomes).enumerate() {
        let mut timed: Vec<Problem> = Vec::new();
        for c in classes.iter().filter(|c| c.champion == Some(i)) {
            if !timed.contains(&c.problem) {
                timed.push(c.problem);
            }
        }
        // plan() keeps only the genomes some class uses.
        let Some(head_dim) = timed.first().map(|p| p.head_dim) else {
            continue;
        };
        let (cases, suite) = green_cases(head_dim);
        eprintln!(
            "{} ({}): GREEN on the {suite} suite's {} D{head_dim} cases, then FAST on {} classes",
            champion.kernel,
            champion.file,
            cases.len(),
            timed.len()
        );
        let start = Instant::now();
        let run = BackwardRun {
            device: &device,
            tc: &tc,
            target,
            seed: args.seed,
            cases,
            timed,
            json: None,
        };
        let source = KernelSource::Genome {
            name: champion.kernel.clone(),
            genome: *genome,
        };
        outcomes[i] = gate_kernels(&run, &[source], &mut std::io::stderr())?.pop();
        eprintln!(
            "{}: {:.1} s",
            champion.kernel,
            start.elapsed().as_secs_f64()
        );
        // Each genome's rows reach the file as they are measured, so a run stopped later
        // keeps them; the final write adds the baselines.
        write_json(
            &rows_of(&classes, &champions, &outcomes, &[]),
            &outcomes,
            &[],
        )?;
    }
    drop(device);

    let problems: Vec<Problem> = classes
        .iter()
        .filter(|c| c.champion.is_some())
        .map(|c| c.problem)
        .collect();
    let script = &args.sdpa_backward_script;
    let baselines = "SDPA backward baselines";
    let sdpa = match super::sdpa_rows(args, script, &problems, &BACKENDS, baselines) {
        None => Vec::new(),
        Some(sdpa) => {
            if sdpa.iter().any(|r| r.pass != Pass::Backward) {
                eprintln!(
                    "{} printed forward rows, left out of the table: --sdpa-backward-script \
                     names the backward's script (scripts/sdpa_backward_baseline.py)",
                    script.display()
                );
            }
            if !args.cold_l2 {
                eprintln!("the baselines' cold-L2 columns are empty: add --cold-l2 to time them");
            }
            sdpa
        }
    };
    let rows = rows_of(&classes, &champions, &outcomes, &sdpa);
    println!(
        "backward (dQ, dK, dV) on {dev}, {dtype}, run seed {}",
        args.seed
    );
    print!("{}", backward_table(&rows, &champions));
    write_json(&rows, &outcomes, &sdpa)?;
    if let Some(json) = &args.json {
        eprintln!(
            "wrote {} classes, {} genomes' gates and {} baseline rows to {}",
            rows.len(),
            champions.len(),
            sdpa.len(),
            json.display()
        );
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .flatten()
        .filter(|o| !o.passed)
        .map(|o| o.kernel.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "backward genomes failed GREEN or FAST (see the log): {}",
            failed.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backward_genome_is_checked_on_cases_of_its_head_dim() {
        for d in [64, 96, 128, 256] {
            let d = HeadDim::try_from(d).unwrap();
            let (cases, suite) = green_cases(d);
            assert!(!cases.is_empty(), "D{d}");
            assert!(cases.iter().all(|c| c.problem.head_dim == d), "D{d}");
            // The quick suite has no D96 or D256 case: the default suite's.
            let want = if matches!(d.get(), 96 | 256) {
                "default"
            } else {
                "quick"
            };
            assert_eq!(suite, want, "D{d}");
        }
    }

    /// Every class gets the genome of the entry that serves its head dim and dtype (none
    /// where no entry does; the recorded table has one for each of its head dims), and
    /// each genome is gated once.
    #[test]
    fn each_class_gets_the_backward_genome_of_its_head_dim() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("genomes/champions/h100");
        let (table, _) = crate::commands::champions::load_table(&dir).unwrap();
        let files = table.load_backward(&dir, &dir.join(DISPATCH_FILE)).unwrap();
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let Plan {
                classes,
                champions,
                genomes,
            } = plan(&table, &files, dtype).unwrap();
            assert_eq!(classes.len(), table.classes.len());
            assert_eq!(genomes.len(), champions.len());
            let mut files: Vec<&str> = champions.iter().map(|c| c.file.as_str()).collect();
            files.sort();
            files.dedup();
            assert_eq!(files.len(), champions.len(), "each genome once: {files:?}");
            for c in &classes {
                assert_eq!(c.problem.dtype, dtype);
                let entry = table.backward_for(c.problem.head_dim, dtype);
                let planned = c.champion.map(|i| champions[i].file.as_str());
                assert_eq!(planned, entry.map(|e| e.genome.as_str()), "{}", c.name);
                assert!(planned.is_some(), "{}: no backward genome", c.name);
                if let Some(i) = c.champion {
                    assert_eq!(genomes[i].pass(), Pass::Backward);
                    assert_eq!(champions[i].genome_id, genomes[i].id().to_string());
                }
            }
        }
    }
}
