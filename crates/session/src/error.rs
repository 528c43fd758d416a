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
    /// A project file could not be read, parsed or written; the text says which and how.
    #[error("{0}")]
    File(String),
    #[error("git: {0}")]
    Git(String),
    /// A git operation of a task branch failed; the text says which.
    #[error("{0}")]
    Branch(String),
}

fn gate_text(refusal: &GateRefusal) -> String {
    match refusal {
        GateRefusal::Garbage(lines) => format!("garbage: {}", lines.join("; ")),
        GateRefusal::Hook { hook, output } => format!("{hook} refused the commit: {output}"),
        GateRefusal::Error(e) => e.clone(),
    }
}

/// Text errors of the branch operations, as they come.
impl From<String> for Error {
    fn from(e: String) -> Error {
        Error::Branch(e)
    }
}

impl From<&str> for Error {
    fn from(e: &str) -> Error {
        Error::Branch(e.to_owned())
    }
}

impl From<code_intel_gitstate::Error> for Error {
    fn from(e: code_intel_gitstate::Error) -> Error {
        match e {
            code_intel_gitstate::Error::Conflict => Error::Conflict,
            code_intel_gitstate::Error::Locked(lock) => Error::Locked(lock),
            code_intel_gitstate::Error::Git(e) => Error::Git(e),
            e @ (code_intel_gitstate::Error::Refused(_) | code_intel_gitstate::Error::Incomplete(_)) => {
                Error::Branch(e.to_string())
            }
        }
    }
}
