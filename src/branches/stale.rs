//! `llm_task_*` branches left by earlier sessions: listing them with their base and how far
//! ahead they are, deleting them, merging the current one, and switching away from one.

use std::path::Path;

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;
use schemars::JsonSchema;
use serde::Serialize;

use super::{parse_task_branch, ref_id, worktree};
use crate::gitstore::{apply, delete, update};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StaleBranch {
    pub branch: String,
    /// The branch it was created from (from its name), when known.
    pub base: Option<String>,
    /// Commits on the task branch that its base does not have.
    pub ahead: usize,
    /// HEAD is on it.
    pub current: bool,
}

/// Every `llm_task_*` branch with its base and commits ahead.
pub fn list(root: &Path) -> Result<Vec<StaleBranch>, String> {
    let repo = super::open(root)?;
    let head = repo.head_name().map_err(|e| e.to_string())?.map(|n| n.shorten().to_string());
    let platform = repo.references().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for r in platform.prefixed("refs/heads/llm_task_").map_err(|e| e.to_string())?.flatten() {
        let branch = r.name().shorten().to_string();
        let Some(tip) = r.target().try_id().map(ToOwned::to_owned) else { continue };
        let base = parse_task_branch(&branch).map(|(_, b)| b);
        let base_tip = match &base {
            Some(b) => ref_id(&repo, &format!("refs/heads/{b}"))?,
            None => None,
        };
        let ahead = ahead_of(&repo, tip, base_tip)?;
        out.push(StaleBranch { current: head.as_deref() == Some(branch.as_str()), branch, base, ahead });
    }
    out.sort_by(|a, b| a.branch.cmp(&b.branch));
    Ok(out)
}

fn ahead_of(repo: &gix::Repository, tip: ObjectId, base: Option<ObjectId>) -> Result<usize, String> {
    let walk = repo.rev_walk([tip]).with_hidden(base);
    Ok(walk.all().map_err(|e| e.to_string())?.filter_map(Result::ok).count())
}

/// Points HEAD at `target` (a branch name), bringing the work tree from the current commit to
/// the target's. Files with uncommitted changes that the switch would overwrite stop it.
pub fn switch_to(root: &Path, target: &str) -> Result<(), String> {
    let repo = super::open(root)?;
    let head_name = repo.head_name().map_err(|e| e.to_string())?.ok_or("HEAD is detached")?;
    let from = repo.head_id().map_err(|e| e.to_string())?.detach();
    let target_ref = format!("refs/heads/{target}");
    let to = ref_id(&repo, &target_ref)?.ok_or_else(|| format!("{target} does not exist"))?;
    let tree_move = worktree::TreeMove::plan(&repo, root, super::tree_of(&repo, from)?, super::tree_of(&repo, to)?)
        .map_err(|e| format!("{e} by switching to {target}"))?;
    let head_edit = update(
        "HEAD",
        PreviousValue::MustExistAndMatch(Target::Symbolic(head_name.clone())),
        Target::Symbolic(
            target_ref.as_str().try_into().map_err(|e: gix::validate::reference::name::Error| e.to_string())?,
        ),
        &format!("checkout: moving from {} to {target}", head_name.shorten()),
    )
    .map_err(|e| e.to_string())?;
    apply(&repo, vec![head_edit]).map_err(|e| e.to_string())?;
    tree_move.apply(&repo, root)?;
    Ok(())
}

/// Deletes `branches`; one that HEAD is on is left first for its base.
pub fn delete_branches(root: &Path, branches: &[String]) -> Result<(), String> {
    let current = list(root)?.into_iter().find(|b| b.current && branches.contains(&b.branch));
    if let Some(b) = current {
        let base = b
            .base
            .ok_or_else(|| format!("HEAD is on {}, whose base is unknown; check out a branch first", b.branch))?;
        switch_to(root, &base)?;
    }
    let repo = super::open(root)?;
    let mut edits = Vec::new();
    for b in branches {
        let name = format!("refs/heads/{b}");
        if let Some(tip) = ref_id(&repo, &name)? {
            edits
                .push(delete(&name, PreviousValue::MustExistAndMatch(Target::Object(tip))).map_err(|e| e.to_string())?);
        }
    }
    if !edits.is_empty() {
        apply(&repo, edits).map_err(|e| e.to_string())?;
    }
    Ok(())
}
