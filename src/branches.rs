//! The `llm_task_*` branch of a session, through gix. (Creation only so far; committing,
//! reviewing, merging and clean-up come with the branch lifecycle.)

use std::path::Path;

use gix::bstr::BString;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::{FullName, Target};

pub const TASK_BRANCH_PREFIX: &str = "llm_task_";

/// Creates `llm_task_<session>` at the current commit and makes it HEAD. The work tree and the
/// index are untouched: the new branch points at the commit they are based on, so uncommitted
/// work carries over. Returns (task branch, base branch).
pub fn create_task_branch(root: &Path, session_id: &str) -> Result<(String, String), String> {
    let repo = gix::open(root).map_err(|e| e.to_string())?;
    let head_name = repo
        .head_name()
        .map_err(|e| e.to_string())?
        .ok_or("HEAD is detached; check out a branch before starting a task branch")?;
    let head =
        repo.head_id().map_err(|_| "the repository has no commits yet; make a first commit".to_owned())?.detach();
    let base = head_name.shorten().to_string();
    let branch = format!("{TASK_BRANCH_PREFIX}{session_id}");
    let full = FullName::try_from(format!("refs/heads/{branch}")).map_err(|e| e.to_string())?;
    let log = |message: String| LogChange {
        mode: RefLog::AndReference,
        force_create_reflog: false,
        message: BString::from(message),
    };
    let edits = vec![
        RefEdit {
            change: Change::Update {
                log: log(format!("branch: Created from {base}")),
                expected: PreviousValue::MustNotExist,
                new: Target::Object(head),
            },
            name: full.clone(),
            deref: false,
        },
        RefEdit {
            change: Change::Update {
                log: log(format!("checkout: moving from {base} to {branch}")),
                expected: PreviousValue::MustExistAndMatch(Target::Symbolic(head_name.clone())),
                new: Target::Symbolic(full),
            },
            name: FullName::try_from("HEAD").map_err(|e| e.to_string())?,
            deref: false,
        },
    ];
    let sig = gix::actor::Signature {
        name: "git-code-intel".into(),
        email: "git-code-intel@localhost".into(),
        time: gix::date::Time::now_local_or_utc(),
    };
    let committer = match repo.committer() {
        Some(Ok(s)) => s.to_owned().unwrap_or(sig),
        _ => sig,
    };
    let mut buf = gix::date::parse::TimeBuf::default();
    repo.edit_references_as(edits, Some(committer.to_ref(&mut buf))).map_err(|e| e.to_string())?;
    Ok((branch, base))
}
