//! Git plumbing for the state git-code-intel keeps, natively through gix: compare-and-swap ref
//! edits and the commit writer ([`refs`]), append-only JSON logs ([`log`]), the crash-safe
//! operation journal and its lock ([`journal`]), work-tree snapshots, diffs and restores
//! ([`worktree`]), git notes ([`notes`]) and the recent-history ranking (`history`); which refs
//! travel between clones and how a remote's are staged and merged ([`shared`]), bounded reads of
//! objects another clone wrote ([`untrusted`]), and the clone's seal on what it wrote itself
//! (`seal`).
//!
//! Nothing here knows what a session, a phase or a task is: those live in the binary crate,
//! which gives this crate refs, trees and JSON. Of this workspace it uses only `code-intel-files`
//! (the one atomic writer).

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

mod atomic;
mod history;
pub mod journal;
pub mod lock;
pub mod log;
pub mod notes;
pub mod refs;
mod seal;
pub mod shared;
pub mod untrusted;
pub mod worktree;

// The chosen list: what the private modules offer the layers above.
pub use atomic::write_atomically;
pub use history::{RECENT_COMMITS, recently_changed};
pub use seal::CloneKey;

/// The ref of git-code-intel's notes (see [`notes`]).
pub const NOTES_REF: &str = "refs/notes/code-intel";

/// What can go wrong writing git state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A compare-and-swap lost: another process moved the ref first. Read it again and retry.
    #[error("the ref was changed by another process")]
    Conflict,
    /// A lock file is in the way of the refs to change.
    #[error(
        "{0} is in the way: another git process holds it, or one was killed while holding it; if no git command is running, delete that file and retry"
    )]
    Locked(String),
    /// A journaled operation's ref transaction failed: nothing changed. `lock` is a lock file
    /// found in the way of its refs.
    #[error("{}", refused_text(source, lock.as_deref()))]
    Refused {
        #[source]
        source: Box<Error>,
        lock: Option<std::path::PathBuf>,
    },
    /// A journaled operation moved its refs, but a later step failed: the journal stays in
    /// `.git/code-intel/`, and the next git-code-intel command finishes it.
    #[error("{0} (the operation is journaled; the next git-code-intel command finishes it)")]
    Incomplete(#[source] Box<Error>),
    /// A gix operation failed; the cause is the error's source.
    #[error("git: {0}")]
    Git(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A file under `.git` or in the work tree could not be read or written: what was done
    /// (`"read"`, `"write"`, …), to which file, and the cause.
    #[error("git: cannot {what} {}: {source}", path.display())]
    File {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// What git holds is not what it must be (a ref that kept changing, a clone key that is
    /// not one, uncommitted changes in the way), in words: there is no lower cause.
    #[error("git: {0}")]
    Invalid(String),
}

fn refused_text(source: &Error, lock: Option<&std::path::Path>) -> String {
    match lock {
        Some(lock) => format!(
            "{source}: {} is in the way (another git process holds it, or one was killed while holding it; \
             if no git command is running, delete that file and retry)",
            lock.display()
        ),
        None => source.to_string(),
    }
}

/// A gix error (or any other, boxed), kept as the cause: `.map_err(git)`.
pub(crate) fn git(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Git(Box::new(e))
}

/// A failed `what` ("read", "write", …) of `path`, with its cause: `.map_err(file("read", &path))`.
pub(crate) fn file<'a>(what: &'static str, path: &'a std::path::Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::File { what, path: path.to_owned(), source }
}
