//! Git plumbing for the state git-code-intel keeps, natively through gix: compare-and-swap ref
//! edits and the commit writer ([`refs`]), append-only JSON logs ([`log`]), the crash-safe
//! operation journal and its lock ([`journal`]), work-tree snapshots, diffs and restores
//! ([`worktree`]), git notes ([`notes`]) and the recent-history ranking ([`history`]); which refs
//! travel between clones and how a remote's are staged and merged ([`shared`]), bounded reads of
//! objects another clone wrote ([`untrusted`]), and the clone's seal on what it wrote itself
//! ([`seal`]).
//!
//! Nothing here knows what a session, a phase or a task is: those live in the binary crate,
//! which gives this crate refs, trees and JSON. Of this workspace it uses only `code-intel-files`
//! (the one atomic writer).

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

pub mod atomic;
pub mod history;
pub mod journal;
pub mod lock;
pub mod log;
pub mod notes;
pub mod refs;
pub mod seal;
pub mod shared;
pub mod untrusted;
pub mod worktree;

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
    /// A journaled operation's ref transaction failed: nothing changed.
    #[error("{0}")]
    Refused(String),
    /// A journaled operation moved its refs, but a later step failed: the journal stays in
    /// `.git/code-intel/`, and the next git-code-intel command finishes it.
    #[error("{0} (the operation is journaled; the next git-code-intel command finishes it)")]
    Incomplete(String),
    #[error("git: {0}")]
    Git(String),
}

/// Any gix or file-system error, as text.
pub(crate) fn git(e: impl std::fmt::Display) -> Error {
    Error::Git(e.to_string())
}

/// Text errors from gix and the file system, as they come: `?` on them gives [`Error::Git`].
impl From<String> for Error {
    fn from(e: String) -> Error {
        Error::Git(e)
    }
}
