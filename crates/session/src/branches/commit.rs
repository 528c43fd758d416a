//! PRE_COMMIT: discarded files go back to their base state (a discarded new file is removed),
//! everything else is committed onto the task branch, and the index is rewritten from the new
//! tree so `git status` is clean.

use std::collections::BTreeMap;
use std::path::Path;

use gix::ObjectId;

use super::gate::{self, CommitGate};
use crate::Error;
use code_intel_gitstate::journal::{Journal, RefChange, RefValue, Step};
use code_intel_gitstate::refs::write_commit_with;
use code_intel_gitstate::worktree::{self, ChangeKind};

/// Plans the commit of the work tree onto `task_branch` as a journaled operation; the value is
/// the new tip. The commit object is written now; the journal moves the branch to it, brings
/// each discarded file back to what it was before the task (the user's version if they had
/// one, else the base; a discarded new file is removed), and rewrites the index from the
/// committed tree. With nothing to commit the branch stays and only the rest happens.
#[allow(clippy::too_many_arguments)]
pub fn plan_commit(
    repo: &gix::Repository,
    root: &Path,
    task_branch: &str,
    base_commit: ObjectId,
    message: &str,
    discard: &[String],
    user_changes: &BTreeMap<String, Option<ObjectId>>,
    gate: Option<&CommitGate>,
) -> Result<(ObjectId, Journal), Error> {
    let branch_ref = format!("refs/heads/{task_branch}");
    let head = repo.head_name().map_err(crate::error::git)?.map(|n| n.as_bstr().to_string());
    if head.as_deref() != Some(branch_ref.as_str()) {
        return Err(crate::Error::Branch(format!("HEAD is not on {task_branch}")));
    }
    let tip = super::ref_id(repo, &branch_ref)?
        .ok_or_else(|| crate::Error::Branch(format!("{task_branch} does not exist")))?;
    let base_tree = super::tree_of(repo, base_commit)?;
    let changes = worktree::changes(repo, root, base_tree, worktree::STREAM_OVER)?;
    let mut editor = repo.edit_tree(base_tree).map_err(crate::error::git)?;
    let mut after = Vec::new();
    let mut committed: Vec<&worktree::Change> = Vec::new();
    for c in &changes {
        let users = user_changes.get(&c.path);
        if discard.iter().any(|d| d == &c.path) {
            // Discarding goes back to what was there before the task: the user's version if
            // they had one, else the base.
            let to = match users {
                Some(Some(id)) => Some((*id, c.new.map_or(gix::objs::tree::EntryKind::Blob, |n| n.1))),
                Some(None) => None,
                None => c.old,
            };
            after.push(Step::File {
                path: c.path.clone(),
                from: code_intel_gitstate::journal::blob(c.new),
                to: code_intel_gitstate::journal::blob(to),
            });
            continue;
        }
        // The user's own uncommitted work, untouched by the task, stays uncommitted.
        if let Some(user) = users
            && *user == c.new.map(|n| n.0)
        {
            continue;
        }
        committed.push(c);
        match (c.kind, c.new) {
            (ChangeKind::Deleted, _) => {
                editor.remove(c.path.as_str()).map_err(crate::error::git)?;
            }
            (_, Some((_, kind))) => {
                let id = worktree::store_blob(repo, root, c)?;
                editor.upsert(c.path.as_str(), kind, id).map_err(crate::error::git)?;
            }
            _ => {}
        }
    }
    let tree = editor.write().map_err(crate::error::git)?.detach();
    if let Some(gate) = gate.filter(|g| g.passed != Some(tree)) {
        gate::check(repo, root, gate, &committed, tree).map_err(Error::Gate)?;
    }
    let tip_tree = super::tree_of(repo, tip)?;
    let mut refs = Vec::new();
    let new_tip = if tree == tip_tree {
        tip
    } else {
        let commit = write_commit_with(repo, tree, &[tip], message)?;
        let summary = message.lines().next().unwrap_or("");
        refs.push(RefChange {
            name: branch_ref,
            expected: Some(RefValue::Object(tip.to_string())),
            new: Some(RefValue::Object(commit.to_string())),
            message: format!("commit: {summary}"),
        });
        commit
    };
    // The user's own changes still differ from the index: those left out of the commit, and
    // those a discard brings back. (Recording the stat data of such a file against the tree's
    // blob would hide the user's change from git status once the file's timestamp is no
    // longer racy.)
    let differs: Vec<String> = changes
        .iter()
        .filter(|c| match user_changes.get(&c.path) {
            Some(user) if discard.contains(&c.path) => user.is_some() || c.old.is_some(),
            Some(user) => *user == c.new.map(|n| n.0),
            None => false,
        })
        .map(|c| c.path.clone())
        .collect();
    after.push(Step::Index { tree, differs });
    Ok((new_tip, Journal::new(format!("committing on {task_branch}"), refs, after)))
}

/// Plans and runs the commit (see [`plan_commit`]) under the operation lock, with no session
/// to record it, and no gate.
pub fn commit_task(
    root: &Path,
    task_branch: &str,
    base_commit: ObjectId,
    message: &str,
    discard: &[String],
    user_changes: &BTreeMap<String, Option<ObjectId>>,
) -> Result<ObjectId, crate::Error> {
    code_intel_gitstate::journal::operate(root, code_intel_gitstate::journal::NO_RECORD, |repo| {
        plan_commit(repo, root, task_branch, base_commit, message, discard, user_changes, None)
    })
    .map(|(tip, _)| tip)
}
