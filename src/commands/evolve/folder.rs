//! Which folder a search writes, and when it may: the lock of an experiment's folder,
//! the default folder (resumed only for the same search), and the recorded lineage that
//! a resume must not replace with another search's.

use super::config::{resolve_config, Refusal, Resolved};
use super::EvolveArgs;
use anyhow::bail;
use evo_gates::outcome::files::{this_process, FolderLock};
use evo_genome::GenomeFile;
use evo_lineage::Lineage;
use evo_mutator::{ExperimentConfig, EXPERIMENT_FILE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How many numbered names (`-2`, `-3`, ...) the default folder tries past its own.
const DEFAULT_FOLDER_TRIES: u32 = 100;

/// The lock of a folder that holds an experiment: taken before its record is read, so that
/// no other search changes it between the checks and the search. A folder without one
/// is locked once the search can start (a folder that is refused gets no lock file).
pub(super) fn lock_if_present(dir: &Path) -> anyhow::Result<Option<FolderLock>> {
    if !dir.join(EXPERIMENT_FILE).is_file() {
        return Ok(None);
    }
    Ok(Some(FolderLock::acquire(dir, &this_process())?))
}

/// The default folder (no --experiment): `base` when it is new or holds exactly the
/// experiment these options describe (then it is resumed: the quick start run twice
/// answers from its cache), else the first of `base-2`, `base-3`, ... that is. A folder
/// the user did not name is never refused for its contents, and never taken over.
pub(super) fn default_folder(
    args: &EvolveArgs,
    base: &Path,
    fresh: &ExperimentConfig,
    genomes: &BTreeMap<String, GenomeFile>,
) -> anyhow::Result<(PathBuf, Resolved, Option<FolderLock>)> {
    let mut skipped = Vec::new();
    for n in 1..=DEFAULT_FOLDER_TRIES {
        let dir = match n {
            1 => base.to_path_buf(),
            n => PathBuf::from(format!("{}-{n}", base.display())),
        };
        let lock = match lock_if_present(&dir) {
            Ok(lock) => lock,
            Err(e) => {
                skipped.push(format!("{}: {e:#}", dir.display()));
                continue;
            }
        };
        match resolve_config(args, &dir, genomes) {
            Ok(resolved) if !resolved.resumed || same_search(&resolved.config, fresh) => {
                for why in &skipped {
                    eprintln!("note: not resumed: {why}");
                }
                return Ok((dir, resolved, lock));
            }
            Ok(_) => skipped.push(format!(
                "{}: records another search than these options",
                dir.display()
            )),
            Err(e) => skipped.push(format!("{e:#}")),
        }
    }
    bail!(
        "{} and its {} numbered siblings are taken; name a folder with --experiment",
        base.display(),
        DEFAULT_FOLDER_TRIES - 1
    )
}

/// The recorded config is the one `fresh` (these options) would write, but for the name,
/// the budget (which may grow) and what the first run fixed (a steady search's in-flight
/// count when none was given).
fn same_search(recorded: &ExperimentConfig, fresh: &ExperimentConfig) -> bool {
    let mut fresh = fresh.clone();
    fresh.name.clone_from(&recorded.name);
    fresh.budget = recorded.budget.clone();
    if fresh.evolutionary.in_flight.is_none() {
        fresh.evolutionary.in_flight = recorded.evolutionary.in_flight;
    }
    fresh == *recorded
}

/// A resumed folder's lineage must be this search's: a run on another device (`auto`
/// on a machine with a GPU, another --landscape) or for another objective would replace
/// it with a lineage of its own.
pub(super) fn refuse_other_lineage(
    path: &Path,
    device: &str,
    objective: &str,
) -> anyhow::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let recorded = Lineage::load(path)?;
    if recorded.meta.device != device || recorded.meta.objective != objective {
        return Err(Refusal(format!(
            "{}: records a search on `{}` for {}, but this run searches on `{device}` for {objective} and would replace it; resume it where it was recorded (the same backend and landscape), or use a new --experiment folder",
            path.display(),
            recorded.meta.device,
            recorded.meta.objective
        ))
        .into());
    }
    Ok(())
}
