//! The operation lock: every write under `refs/code-intel/`, and every operation of several
//! steps, holds an exclusive lock on `.git/code-intel/operation.lock` (a file lock the kernel
//! drops when its process dies). It is re-entrant within a thread, and serializes the threads of
//! one process and the processes on one repository. While it is held, a `.lock` file left under
//! `refs/code-intel/` can only come from a process that died: it is removed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const DIR: &str = "code-intel";
const LOCK_FILE: &str = "code-intel/operation.lock";
/// How long to wait for another process's operation before giving up.
const LOCK_TIMEOUT: Duration = Duration::from_secs(60);

struct Held {
    thread: std::thread::ThreadId,
    depth: usize,
    /// Kept open while held: closing it releases the lock.
    _file: File,
}

static HELD: Mutex<Option<Held>> = Mutex::new(None);

/// The operation lock, held until dropped.
pub struct OperationLock {
    _private: (),
}

impl OperationLock {
    /// Takes the lock of the repository whose git directory is `git_dir`, waiting for another
    /// process (or thread) that holds it.
    pub fn acquire(git_dir: &Path) -> Result<OperationLock, crate::Error> {
        let me = std::thread::current().id();
        let started = Instant::now();
        loop {
            {
                let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
                match held.as_mut() {
                    Some(h) if h.thread == me => {
                        h.depth += 1;
                        return Ok(OperationLock { _private: () });
                    }
                    Some(_) => {}
                    None => {
                        let path = git_dir.join(LOCK_FILE);
                        if let Some(dir) = path.parent() {
                            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                        }
                        let file = std::fs::OpenOptions::new()
                            .create(true)
                            .truncate(false)
                            .read(true)
                            .write(true)
                            .open(&path)
                            .map_err(|e| format!("{}: {e}", path.display()))?;
                        match file.try_lock() {
                            Ok(()) => {
                                *held = Some(Held { thread: me, depth: 1, _file: file });
                                return Ok(OperationLock { _private: () });
                            }
                            Err(std::fs::TryLockError::WouldBlock) => {}
                            Err(std::fs::TryLockError::Error(e)) => {
                                return Err(crate::Error::Git(format!("{}: {e}", path.display())));
                            }
                        }
                    }
                }
            }
            if started.elapsed() > LOCK_TIMEOUT {
                return Err(crate::Error::Git(format!(
                    "another git-code-intel process has held {} for over {} s; if none is running, retry",
                    git_dir.join(LOCK_FILE).display(),
                    LOCK_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for OperationLock {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.as_mut() {
            h.depth -= 1;
            if h.depth == 0 {
                // Closing the file releases the lock.
                *held = None;
            }
        }
    }
}

/// Removes the `.lock` files of our own refs among `refs`. Call with the operation lock held:
/// every git-code-intel process writes `refs/code-intel/*`, `refs/code-intel-local/*`, its
/// sessions (`refs/worktree/code-intel/*`) and `refs/notes/code-intel` only while holding it, so
/// such a lock belongs to a process that died. (The remotes' staged refs are git fetch's: a lock
/// there may be a live fetch's, and is left alone.)
pub fn remove_stale_ref_locks(git_dir: &Path, refs: &[&str]) {
    let ours = |n: &&&str| {
        ["refs/code-intel/", "refs/code-intel-local/", "refs/worktree/code-intel/"].iter().any(|p| n.starts_with(p))
            || **n == crate::NOTES_REF
    };
    for name in refs.iter().filter(ours) {
        let lock = git_dir.join(format!("{name}.lock"));
        if lock.exists() {
            match std::fs::remove_file(&lock) {
                Ok(()) => tracing::warn!("removed {}, left by a git-code-intel process that died", lock.display()),
                Err(e) => tracing::warn!("cannot remove the stale {}: {e}", lock.display()),
            }
        }
    }
}

/// The first `.lock` file of `refs` (or of the index) in the way, for an error message.
pub fn lock_in_the_way(git_dir: &Path, refs: &[&str]) -> Option<PathBuf> {
    refs.iter().map(|n| git_dir.join(format!("{n}.lock"))).find(|p| p.exists())
}

/// The git directory's `code-intel/` folder.
pub fn state_dir(git_dir: &Path) -> PathBuf {
    git_dir.join(DIR)
}
