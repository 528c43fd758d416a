//! The operation lock: every write under `refs/code-intel/`, and every operation of several
//! steps, holds an exclusive lock on `.git/code-intel/operation.lock` in the common git
//! directory (a file lock the kernel drops when its process dies), so the processes of every
//! work tree of a repository take turns. It is re-entrant within a thread, and serializes the
//! threads of one process and the processes on one repository. While it is held, a `.lock` file
//! left on one of our refs can only come from a process that died: it is removed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const DIR: &str = "code-intel";
const LOCK_FILE: &str = "code-intel/operation.lock";
/// How long to wait for another process's operation before giving up.
const LOCK_TIMEOUT: Duration = Duration::from_secs(120);

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
                            std::fs::create_dir_all(dir).map_err(crate::file("create", dir))?;
                        }
                        let file = std::fs::OpenOptions::new()
                            .create(true)
                            .truncate(false)
                            .read(true)
                            .write(true)
                            .open(&path)
                            .map_err(crate::file("open", &path))?;
                        match file.try_lock() {
                            Ok(()) => {
                                *held = Some(Held { thread: me, depth: 1, _file: file });
                                return Ok(OperationLock { _private: () });
                            }
                            Err(std::fs::TryLockError::WouldBlock) => {}
                            Err(std::fs::TryLockError::Error(e)) => {
                                return Err(crate::file("lock", &path)(e));
                            }
                        }
                    }
                }
            }
            if started.elapsed() > LOCK_TIMEOUT {
                return Err(crate::Error::Invalid(format!(
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

/// Where the lock file of ref `name` goes: git's per-work-tree refs (HEAD and the other pseudo
/// refs, `refs/worktree/`, `refs/bisect/`, `refs/rewritten/`) live in the work tree's own git
/// directory, every other ref in the common one that all work trees share.
pub fn ref_lock_path(repo: &gix::Repository, name: &str) -> PathBuf {
    let per_worktree = !name.starts_with("refs/")
        || ["refs/worktree/", "refs/bisect/", "refs/rewritten/"].iter().any(|p| name.starts_with(p));
    let dir = if per_worktree { repo.git_dir() } else { repo.common_dir() };
    dir.join(format!("{name}.lock"))
}

/// Removes the `.lock` files of our own refs among `refs`. Call with the operation lock held:
/// every git-code-intel process of any work tree of the repository writes `refs/code-intel/*`,
/// `refs/code-intel-local/*`, its sessions (`refs/worktree/code-intel/*`) and
/// `refs/notes/code-intel` only while holding it, so such a lock belongs to a process that died.
/// (The remotes' staged refs are git fetch's: a lock there may be a live fetch's, and is left
/// alone.)
pub fn remove_stale_ref_locks(repo: &gix::Repository, refs: &[&str]) {
    let ours = |n: &&&str| {
        ["refs/code-intel/", "refs/code-intel-local/", "refs/worktree/code-intel/"].iter().any(|p| n.starts_with(p))
            || **n == crate::NOTES_REF
    };
    for name in refs.iter().filter(ours) {
        let lock = ref_lock_path(repo, name);
        if lock.exists() {
            match std::fs::remove_file(&lock) {
                Ok(()) => tracing::warn!("removed {}, left by a git-code-intel process that died", lock.display()),
                Err(e) => tracing::warn!("cannot remove the stale {}: {e}", lock.display()),
            }
        }
    }
}

/// The first `.lock` file of `refs` in the way, for an error message.
pub fn lock_in_the_way(repo: &gix::Repository, refs: &[&str]) -> Option<PathBuf> {
    refs.iter().map(|n| ref_lock_path(repo, n)).find(|p| p.exists())
}

/// The operation lock of `repo`: one for the repository, whichever work tree asks (its refs and
/// objects are shared), in the common git directory.
pub fn acquire(repo: &gix::Repository) -> Result<OperationLock, crate::Error> {
    OperationLock::acquire(repo.common_dir())
}

/// The git directory's `code-intel/` folder.
pub fn state_dir(git_dir: &Path) -> PathBuf {
    git_dir.join(DIR)
}
