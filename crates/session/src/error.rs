//! The binary crate's one error type for what fails below its answers: the session store, task
//! branches (commit, merge), and `.code-intel/context.yml`. The adapters turn it into the
//! contract's message for the agent ([`crate::session::SessionError`],
//! [`crate::tools::ToolError`]: those two are the wire formats of a refusal, not errors of
//! this crate's own).

use crate::branches::gate::GateRefusal;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not a git repository: {0}")]
    NotGit(String),
    /// start_session while another session holds this work tree's active claim.
    #[error("another session is active: {0}")]
    Busy(String),
    /// A compare-and-swap on the session lost: another process advanced it first.
    #[error("the session was changed by another process")]
    Conflict,
    #[error("the checkpoint cannot be read: {0}")]
    Corrupt(String),
    /// The checkpoint at this ref does not carry this clone's seal: it arrived from elsewhere
    /// (a fetch of every ref) or was edited by hand, so it is not obeyed.
    #[error("{0} was not written by this clone")]
    Foreign(String),
    /// The checkpoint names a phase this build does not know (written by a newer version).
    #[error("unknown phase {0}")]
    UnknownPhase(String),
    /// A lock file is in the way of the refs to change.
    #[error(
        "{0} is in the way: another git process holds it, or one was killed while holding it; if no git command is running, delete that file and retry"
    )]
    Locked(String),
    /// The commit gate refused what would be committed (garbage, or the repository's own
    /// pre-commit hook).
    #[error("{}", gate_text(.0))]
    Gate(GateRefusal),
    /// The merge stopped at conflicts in these files; nothing changed.
    #[error("conflicts in {}", .0.join(", "))]
    MergeConflicts(Vec<String>),
    /// An argument is wrong (named), and why.
    #[error("{0}: {1}")]
    Argument(&'static str, String),
    /// A project file could not be read or parsed, or would not parse once edited; the text
    /// says which and how.
    #[error("{0}")]
    File(String),
    /// A project file could not be written: the I/O error, which names the file, is the source.
    #[error("{0}")]
    Write(#[source] std::io::Error),
    /// A gix operation failed; the cause is the error's source.
    #[error("git: {0}")]
    Git(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// What the git plumbing below reported (it says what failed, and keeps the cause).
    #[error(transparent)]
    GitState(code_intel_gitstate::Error),
    /// A task branch is not as the operation needs it (missing, moved, not a branch); the text
    /// says which and how.
    #[error("{0}")]
    Branch(String),
}

/// A gix error (or any other), kept as the cause: `.map_err(git)`.
pub(crate) fn git(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Git(Box::new(e))
}

fn gate_text(refusal: &GateRefusal) -> String {
    match refusal {
        GateRefusal::Garbage(lines) => format!("garbage: {}", lines.join("; ")),
        GateRefusal::Hook { hook, output } => format!("{hook} refused the commit: {output}"),
        GateRefusal::Error(e) => e.clone(),
    }
}

impl From<code_intel_gitstate::Error> for Error {
    fn from(e: code_intel_gitstate::Error) -> Error {
        match e {
            code_intel_gitstate::Error::Conflict => Error::Conflict,
            code_intel_gitstate::Error::Locked(lock) => Error::Locked(lock),
            other => Error::GitState(other),
        }
    }
}
