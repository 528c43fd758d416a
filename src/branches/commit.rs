//! PRE_COMMIT: discarded files go back to their base state (a discarded new file is removed),
//! everything else is committed onto the task branch, and the index is rewritten from the new
//! tree so `git status` is clean.

use std::collections::BTreeMap;
use std::path::Path;

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::worktree::{self, ChangeKind};
use crate::gitstore::{apply, update, write_commit_with};

/// Commits the work tree onto `task_branch`; returns the new tip.
pub fn commit_task(
    root: &Path,
    task_branch: &str,
    base_commit: ObjectId,
    message: &str,
    discard: &[String],
    user_changes: &BTreeMap<String, Option<ObjectId>>,
) -> Result<ObjectId, String> {
    let repo = super::open(root)?;
    let branch_ref = format!("refs/heads/{task_branch}");
    let head = repo.head_name().map_err(|e| e.to_string())?.map(|n| n.as_bstr().to_string());
    if head.as_deref() != Some(branch_ref.as_str()) {
        return Err(format!("HEAD is not on {task_branch}"));
    }
    let tip = super::ref_id(&repo, &branch_ref)?.ok_or_else(|| format!("{task_branch} does not exist"))?;
    let base_tree = super::tree_of(&repo, base_commit)?;
    let changes = worktree::changes(&repo, root, base_tree)?;
    let mut editor = repo.edit_tree(base_tree).map_err(|e| e.to_string())?;
    for c in &changes {
        let users = user_changes.get(&c.path);
        if discard.iter().any(|d| d == &c.path) {
            // Discarding goes back to what was there before the task: the user's version if
            // they had one, else the base.
            match users {
                Some(Some(id)) => worktree::restore(
                    &repo,
                    root,
                    &c.path,
                    Some((*id, c.new.map_or(gix::objs::tree::EntryKind::Blob, |n| n.1))),
                )?,
                Some(None) => worktree::restore(&repo, root, &c.path, None)?,
                None => worktree::restore(&repo, root, &c.path, c.old)?,
            }
            continue;
        }
        // The user's own uncommitted work, untouched by the task, stays uncommitted.
        if let Some(user) = users
            && *user == c.new.map(|n| n.0)
        {
            continue;
        }
        match (c.kind, &c.content, c.new) {
            (ChangeKind::Deleted, _, _) => {
                editor.remove(c.path.as_str()).map_err(|e| e.to_string())?;
            }
            (_, Some(bytes), Some((_, kind))) => {
                let id = repo.write_blob(bytes).map_err(|e| e.to_string())?.detach();
                editor.upsert(c.path.as_str(), kind, id).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
    }
    let tree = editor.write().map_err(|e| e.to_string())?.detach();
    let tip_tree = super::tree_of(&repo, tip)?;
    let new_tip = if tree == tip_tree {
        tip
    } else {
        let commit = write_commit_with(&repo, tree, &[tip], message).map_err(|e| e.to_string())?;
        let summary = message.lines().next().unwrap_or("");
        apply(
            &repo,
            vec![
                update(
                    &branch_ref,
                    PreviousValue::MustExistAndMatch(Target::Object(tip)),
                    Target::Object(commit),
                    &format!("commit: {summary}"),
                )
                .map_err(|e| e.to_string())?,
            ],
        )
        .map_err(|e| e.to_string())?;
        commit
    };
    // The user's own changes left out of the commit still differ from the index.
    let differs: std::collections::BTreeSet<String> = changes
        .iter()
        .filter(|c| !discard.contains(&c.path))
        .filter(|c| user_changes.get(&c.path).is_some_and(|u| *u == c.new.map(|n| n.0)))
        .map(|c| c.path.clone())
        .collect();
    worktree::write_index(&repo, root, tree, &differs)?;
    Ok(new_tip)
}
