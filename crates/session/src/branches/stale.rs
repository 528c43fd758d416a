//! `llm_task_*` branches left by earlier sessions: listing them with their base and how far
//! ahead they are, and deleting them (HEAD leaving for the base first when it is on one).

use std::path::Path;

use gix::ObjectId;
use schemars::JsonSchema;
use serde::Serialize;

use super::{parse_task_branch, ref_id};
use code_intel_gitstate::journal::{Journal, RefChange, RefValue};
use code_intel_gitstate::worktree;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StaleBranch {
    pub branch: String,
    /// The branch it was created from (from its name), when known.
    pub base: Option<String>,
    /// Commits on the task branch that its base does not have.
    pub ahead: usize,
    /// HEAD is on it.
    pub current: bool,
    /// Where it pointed when `ahead` was counted.
    #[serde(skip)]
    #[schemars(skip)]
    pub tip: ObjectId,
}

/// Every `llm_task_*` branch this work tree may act on, with its base and commits ahead. A task
/// branch in use (checked out in another work tree, its session's,
/// being rebased or bisected) is left out; [`elsewhere`] names those. A branch ref that cannot
/// be read is an error, not something to skip: it could hold work.
pub fn list(root: &Path) -> Result<Vec<StaleBranch>, crate::Error> {
    list_in(&super::open(root)?)
}

/// The `llm_task_*` branches in use, each with why and where.
pub fn elsewhere(root: &Path) -> Result<Vec<InUseElsewhere>, crate::Error> {
    Ok(all_in(&super::open(root)?)?.1)
}

fn list_in(repo: &gix::Repository) -> Result<Vec<StaleBranch>, crate::Error> {
    Ok(all_in(repo)?.0)
}

/// A task branch in use, with why and where.
pub type InUseElsewhere = (StaleBranch, String);

/// The task branches: those this work tree may act on, and those in use.
fn all_in(repo: &gix::Repository) -> Result<(Vec<StaleBranch>, Vec<InUseElsewhere>), crate::Error> {
    let head = repo.head_name().map_err(crate::error::git)?.map(|n| n.shorten().to_string());
    let in_use = super::branches_in_use(repo)?;
    let platform = repo.references().map_err(crate::error::git)?;
    let (mut here, mut elsewhere) = (Vec::new(), Vec::new());
    for r in platform.prefixed("refs/heads/llm_task_").map_err(crate::error::git)? {
        let r = r.map_err(crate::error::git)?;
        let branch = r.name().shorten().to_string();
        let Some(tip) = r.target().try_id().map(ToOwned::to_owned) else { continue };
        let base = parse_task_branch(&branch).map(|(_, b)| b);
        let base_tip = match &base {
            Some(b) => ref_id(repo, &format!("refs/heads/{b}"))?,
            None => None,
        };
        let ahead = ahead_of(repo, tip, base_tip)?;
        let b = StaleBranch { current: head.as_deref() == Some(branch.as_str()), branch, base, ahead, tip };
        match in_use.get(&b.branch) {
            Some(path) => elsewhere.push((b, path.clone())),
            None => here.push(b),
        }
    }
    here.sort_by(|a, b| a.branch.cmp(&b.branch));
    elsewhere.sort_by(|a, b| a.0.branch.cmp(&b.0.branch));
    Ok((here, elsewhere))
}

fn ahead_of(repo: &gix::Repository, tip: ObjectId, base: Option<ObjectId>) -> Result<usize, crate::Error> {
    let walk = repo.rev_walk([tip]).with_hidden(base);
    // A commit the walk cannot read is an error, not a commit less: counting short could call
    // a branch with work on it merged.
    let mut ahead = 0;
    for commit in walk.all().map_err(crate::error::git)? {
        commit.map_err(crate::error::git)?;
        ahead += 1;
    }
    Ok(ahead)
}

/// Whether a branch with commits its base lacks may be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmerged {
    /// Only the user decides that (the CLI's `clean --confirm`).
    Delete,
    /// The agent's choice never deletes work: such a branch is kept.
    Keep,
}

/// What [`plan_delete`] will do: the branches it deletes and those it keeps because they hold
/// commits their base lacks.
#[derive(Debug, Clone, Default)]
pub struct Deletion {
    pub deleted: Vec<String>,
    pub kept_unmerged: Vec<StaleBranch>,
}

/// Plans deleting `branches` as a journaled operation: when HEAD is on one of them, HEAD moves
/// to that branch's base in the same ref transaction (the work tree follows, and files with
/// uncommitted changes the move would overwrite refuse the plan), also when the branch itself is
/// kept; each branch is deleted only if it still points where it pointed when its commits
/// ahead were counted. A branch in use is checked again here, under the operation lock, and left
/// alone; with [`Unmerged::Keep`] so is a branch with commits its base lacks.
pub fn plan_delete(
    repo: &gix::Repository,
    root: &Path,
    branches: &[String],
    unmerged: Unmerged,
) -> Result<(Deletion, Journal), crate::Error> {
    let listed: Vec<StaleBranch> = list_in(repo)?.into_iter().filter(|b| branches.contains(&b.branch)).collect();
    let mut refs = Vec::new();
    let mut after = Vec::new();
    if let Some(b) = listed.iter().find(|b| b.current) {
        let base = b.base.clone().ok_or_else(|| {
            crate::Error::Branch(format!("HEAD is on {}, whose base is unknown; check out a branch first", b.branch))
        })?;
        super::not_in_use(repo, &base, &format!("leaving {} for it", b.branch))?;
        let base_ref = format!("refs/heads/{base}");
        let from = repo.head_id().map_err(crate::error::git)?.detach();
        let to = ref_id(repo, &base_ref)?.ok_or_else(|| crate::Error::Branch(format!("{base} does not exist")))?;
        let tree_move = worktree::TreeMove::plan(repo, root, super::tree_of(repo, from)?, super::tree_of(repo, to)?)
            .map_err(|e| crate::Error::Branch(format!("{e} by switching to {base}")))?;
        refs.push(RefChange {
            name: "HEAD".into(),
            expected: Some(RefValue::Symbolic(format!("refs/heads/{}", b.branch))),
            new: Some(RefValue::Symbolic(base_ref)),
            message: format!("checkout: moving from {} to {base}", b.branch),
        });
        after.extend(tree_move.steps());
    }
    let mut deletion = Deletion::default();
    for b in listed {
        if b.ahead > 0 && unmerged == Unmerged::Keep {
            deletion.kept_unmerged.push(b);
            continue;
        }
        refs.push(RefChange {
            name: format!("refs/heads/{}", b.branch),
            expected: Some(RefValue::Object(b.tip.to_string())),
            new: None,
            message: "branch: deleted by git-code-intel".into(),
        });
        deletion.deleted.push(b.branch);
    }
    let what = if deletion.deleted.is_empty() {
        "leaving the task branches".to_owned()
    } else {
        format!("deleting {}", deletion.deleted.join(", "))
    };
    let journal = Journal::new(what, refs, after);
    Ok((deletion, journal))
}

/// Deletes `branches` (see [`plan_delete`]) under the operation lock, with no session to
/// record; returns the ones it deleted.
pub fn delete_branches(root: &Path, branches: &[String]) -> Result<Vec<String>, crate::Error> {
    code_intel_gitstate::journal::operate(root, code_intel_gitstate::journal::NO_RECORD, |repo| {
        plan_delete(repo, root, branches, Unmerged::Delete)
    })
    .map(|(deletion, _)| deletion.deleted)
}
