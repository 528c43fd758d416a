//! The `llm_task_*` branch of a session, natively through gix: creation at READY
//! ([`create_task_branch`]), the changes since its base ([`code_intel_gitstate::worktree`], [`review`]), the
//! PRE_COMMIT commit ([`commit`]) and the MERGE back into the base ([`merge`]).

pub mod commit;
pub mod gate;
pub mod merge;
pub mod review;
pub mod stale;

use std::path::Path;

use gix::ObjectId;
use gix::refs::FullName;

use code_intel_gitstate::journal::{Journal, RefChange, RefValue};

pub const TASK_BRANCH_PREFIX: &str = "llm_task_";

/// A created task branch: its name, the branch it came from, and that branch's commit then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskBranch {
    pub name: String,
    pub base: String,
    pub base_commit: ObjectId,
    /// Uncommitted changes found at creation: path → blob id written for them (None: deleted).
    pub user_changes: std::collections::BTreeMap<String, Option<ObjectId>>,
}

/// `llm_task_<session>_from_<base>`, with the base encoded so that `/` (and `%`) survive:
/// `feature/x` → `feature%2Fx`.
pub fn task_branch_name(session_id: &str, base: &str) -> String {
    format!("{TASK_BRANCH_PREFIX}{session_id}_from_{}", base.replace('%', "%25").replace('/', "%2F"))
}

/// The (session id, base branch) a task branch name was made from.
pub fn parse_task_branch(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(TASK_BRANCH_PREFIX)?;
    let (session, base) = rest.split_once("_from_")?;
    Some((session.to_owned(), base.replace("%2F", "/").replace("%25", "%")))
}

pub(crate) fn open(root: &Path) -> Result<gix::Repository, crate::Error> {
    gix::open(root).map_err(|e| crate::Error::Branch(e.to_string()))
}

pub(crate) use code_intel_gitstate::refs::{ref_id, tree_of};

/// The branches in use in the work trees of the repository (`git worktree`), each with why,
/// naming the work tree: checked out in another work tree; being rebased or bisected in any
/// (this one too: HEAD is detached then, and the branch would look free); or the task branch of
/// the session another work tree has. Git refuses to touch a branch in use; so does everything
/// here that deletes, merges into or checks out a branch.
pub(crate) fn branches_in_use(
    repo: &gix::Repository,
) -> Result<std::collections::BTreeMap<String, String>, crate::Error> {
    let here = std::fs::canonicalize(repo.git_dir()).unwrap_or_else(|_| repo.git_dir().to_path_buf());
    let mut out = std::collections::BTreeMap::new();
    for other in repo.worktrees_including_main().map_err(|e| crate::Error::Branch(e.to_string()))? {
        // A work tree that cannot be opened at all has nothing we could read; `git worktree
        // prune` removes what is left of it.
        let Ok(other) = other else { continue };
        let dir = std::fs::canonicalize(other.git_dir()).unwrap_or_else(|_| other.git_dir().to_path_buf());
        let this_one = dir == here;
        if other.workdir().is_none() && !this_one {
            continue;
        }
        let path = match other.workdir() {
            Some(w) if w.exists() => w.display().to_string(),
            Some(w) => format!("{} (its directory is gone: `git worktree prune` forgets it)", w.display()),
            None => dir.display().to_string(),
        };
        let mut use_of = |branch: Option<String>, why: String| {
            if let Some(branch) = branch.filter(|b| !b.is_empty()) {
                out.entry(branch).or_insert(why);
            }
        };
        if !this_one {
            if let Ok(Some(head)) = other.head_name() {
                use_of(Some(head.shorten().to_string()), format!("checked out in the work tree at {path}"));
            }
            use_of(session_task_branch(&other), format!("the task branch of the session in the work tree at {path}"));
        }
        let where_ = if this_one { "here".to_owned() } else { format!("in the work tree at {path}") };
        for file in ["rebase-merge/head-name", "rebase-apply/head-name"] {
            let head = std::fs::read_to_string(other.git_dir().join(file)).ok();
            let branch = head.map(|h| h.trim().trim_start_matches("refs/heads/").to_owned());
            use_of(branch, format!("being rebased {where_}"));
        }
        let bisect = std::fs::read_to_string(other.git_dir().join("BISECT_START")).ok();
        use_of(bisect.map(|b| b.trim().to_owned()), format!("being bisected {where_}"));
    }
    Ok(out)
}

/// The task branch the active session of `worktree` names, if it has one (read as stored:
/// it only ever keeps a branch from being touched).
fn session_task_branch(worktree: &gix::Repository) -> Option<String> {
    let active = worktree.try_find_reference(crate::session::store::ACTIVE_REF).ok()??;
    let mut active = active;
    let commit = active.peel_to_commit().ok()?;
    let blob = commit.tree().ok()?.find_entry("checkpoint.json")?.object().ok()?;
    let checkpoint: serde_json::Value = serde_json::from_slice(&blob.data).ok()?;
    checkpoint["orchestrator_state"]["task_branch"].as_str().map(str::to_owned)
}

/// Refuses an operation on `branch` when a work tree has it in use ([`branches_in_use`]),
/// saying where.
pub(crate) fn not_in_use(repo: &gix::Repository, branch: &str, doing: &str) -> Result<(), crate::Error> {
    match branches_in_use(repo)?.get(branch) {
        Some(why) => Err(crate::Error::Branch(format!(
            "{branch} is {why}, so {doing} from here would change it under that work; finish or leave it there (or do this from that work tree) and retry"
        ))),
        None => Ok(()),
    }
}

/// Plans creating the task branch at the current commit and making it HEAD, as one ref
/// transaction with reflog entries. The work tree and the index are untouched: the branch points
/// at the commit they are based on, so uncommitted work carries over, and is remembered now
/// (its contents stored as blobs) so the task's commit can leave it alone.
pub fn plan_task_branch(
    repo: &gix::Repository,
    root: &Path,
    session_id: &str,
) -> Result<(TaskBranch, Journal), crate::Error> {
    let head_name = repo.head_name().map_err(crate::error::git)?.ok_or_else(|| {
        crate::Error::Branch("HEAD is detached; check out a branch before starting a task branch".into())
    })?;
    let head = repo
        .head_id()
        .map_err(|_| crate::Error::Branch("the repository has no commits yet; make a first commit".into()))?
        .detach();
    let base = head_name.shorten().to_string();
    let name = task_branch_name(session_id, &base);
    let full = FullName::try_from(format!("refs/heads/{name}")).map_err(crate::error::git)?;
    let refs = vec![
        RefChange {
            name: full.as_bstr().to_string(),
            expected: None,
            new: Some(RefValue::Object(head.to_string())),
            message: format!("branch: Created from {base}"),
        },
        RefChange {
            name: "HEAD".into(),
            expected: Some(RefValue::Symbolic(head_name.as_bstr().to_string())),
            new: Some(RefValue::Symbolic(full.as_bstr().to_string())),
            message: format!("checkout: moving from {base} to {name}"),
        },
    ];
    let user_changes = code_intel_gitstate::worktree::snapshot(repo, root, tree_of(repo, head)?)?;
    let journal = Journal::new(format!("creating the task branch {name}"), refs, Vec::new());
    Ok((TaskBranch { name, base, base_commit: head, user_changes }, journal))
}

/// Creates the task branch (see [`plan_task_branch`]) under the operation lock, with no
/// session to record it.
pub fn create_task_branch(root: &Path, session_id: &str) -> Result<TaskBranch, crate::Error> {
    code_intel_gitstate::journal::operate(root, code_intel_gitstate::journal::NO_RECORD, |repo| {
        plan_task_branch(repo, root, session_id)
    })
    .map(|(b, _)| b)
}

/// Takes over an existing task branch (BRANCH_INTERVENTION `continue`): its base commit is
/// where it left `base`, and the work tree's current changes count as the user's.
pub fn adopt(root: &Path, branch: &str, base: &str) -> Result<TaskBranch, crate::Error> {
    let repo = open(root)?;
    let tip = ref_id(&repo, &format!("refs/heads/{branch}"))?
        .ok_or_else(|| crate::Error::Branch(format!("{branch} does not exist")))?;
    let base_tip = ref_id(&repo, &format!("refs/heads/{base}"))?
        .ok_or_else(|| crate::Error::Branch(format!("{base} does not exist")))?;
    let base_commit =
        repo.merge_base(tip, base_tip).map_err(crate::error::git)?.map(|i| i.detach()).unwrap_or(base_tip);
    let user_changes = code_intel_gitstate::worktree::snapshot(&repo, root, tree_of(&repo, tip)?)?;
    Ok(TaskBranch { name: branch.to_owned(), base: base.to_owned(), base_commit, user_changes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_encode_the_base_reversibly() {
        let name = task_branch_name("20261122_070000_ab12cd34", "feature/x%y");
        assert_eq!(name, "llm_task_20261122_070000_ab12cd34_from_feature%2Fx%25y");
        assert_eq!(parse_task_branch(&name), Some(("20261122_070000_ab12cd34".into(), "feature/x%y".into())));
        assert_eq!(parse_task_branch("llm_task_old"), None);
        assert_eq!(parse_task_branch("main"), None);
    }
}
