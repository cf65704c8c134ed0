//! How evo writes what it measured: whole files through a rename, and one writer per folder.
//!
//! A search, a merge or an export that is interrupted must leave either the old file or the
//! new one, never half of one; two searches on one experiment folder must not interleave
//! their records. Every command that writes goes through these two helpers.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary sibling, synced, then renamed into place:
/// a reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The process id keeps two writers of the same name (in two processes) off one
    // temporary file; the rename decides which whole file stays.
    let tmp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The name of the lock file a writer holds in a folder.
pub const LOCK_FILE: &str = ".evo.lock";

/// What a folder holds besides its lock file, sorted, and a short list of it for a
/// message (the first four names, then how many more); `None` when it holds nothing
/// else. A command that finds someone's files where it meant to write refuses with it.
pub fn other_files(dir: &Path) -> std::io::Result<Option<(Vec<String>, String)>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != LOCK_FILE)
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    names.sort();
    let mut shown = names.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 4 {
        shown += &format!(" and {} more", names.len() - 4);
    }
    Ok(Some((names, shown)))
}

/// An exclusive, advisory lock on a folder, held while the value lives. The operating
/// system drops it when the process ends, however it ends (kill -9 included), so a
/// crashed search never leaves a folder locked.
#[derive(Debug)]
pub struct FolderLock {
    _file: File,
    path: PathBuf,
}

/// Why a folder could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock: what it wrote into the lock file (its command).
    Held { folder: PathBuf, holder: String },
    /// The lock file could not be opened or locked.
    Io {
        folder: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { folder, holder } => write!(
                f,
                "{} is being written by another evo process ({}); wait for it to finish, or use another folder",
                folder.display(),
                if holder.is_empty() { "no command recorded" } else { holder.as_str() }
            ),
            LockError::Io { folder, source } => {
                write!(f, "cannot lock {}: {source}", folder.display())
            }
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Io { source, .. } => Some(source),
            LockError::Held { .. } => None,
        }
    }
}

impl FolderLock {
    /// Takes the folder's lock without waiting, writing `holder` (e.g. the process id and
    /// command) into the lock file so that a refused writer can say who holds it.
    pub fn acquire(folder: &Path, holder: &str) -> Result<FolderLock, LockError> {
        let path = folder.join(LOCK_FILE);
        let io = |source| LockError::Io {
            folder: folder.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(LockError::Held {
                    folder: folder.to_path_buf(),
                    holder: holder.trim().to_string(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.write_all(holder.as_bytes()).map_err(io)?;
        Ok(FolderLock { _file: file, path })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The holder text for this process: its id and command line.
pub fn this_process() -> String {
    let args: Vec<String> = std::env::args().collect();
    format!("pid {}: {}", std::process::id(), args.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
    }

    #[test]
    fn write_atomic_into_a_missing_folder_fails_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("a.json");
        assert!(write_atomic(&path, b"x").is_err());
        assert!(!dir.path().join("missing").exists());
    }

    #[test]
    fn a_second_lock_on_a_folder_is_refused_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = FolderLock::acquire(dir.path(), "pid 1: evo evolve").unwrap();
        let err = FolderLock::acquire(dir.path(), "pid 2").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("another evo process (pid 1: evo evolve)"),
            "{text}"
        );
        drop(first);
        FolderLock::acquire(dir.path(), "pid 3").expect("free after the first is dropped");
    }
}
