//! MERGE: the task branch back into the base it was created from. A base that has not moved
//! is fast-forwarded; otherwise gix makes a real 3-way merge commit. Conflicts, or uncommitted
//! work the merge would overwrite, leave refs, index and work tree untouched. Afterwards HEAD
//! is the base again, only files the merge changed are rewritten, the task branch is deleted,
//! and a note under `refs/notes/code-intel` records the session on the resulting commit. It is
//! a journaled operation: a kill at any point is finished by the next process.

use std::path::Path;

use gix::ObjectId;

use crate::Error;
use code_intel_gitstate::journal::{Journal, RefChange, RefValue, Step};
use code_intel_gitstate::refs::write_commit_with;
use code_intel_gitstate::worktree;

pub use code_intel_gitstate::notes::NOTES_REF;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub commit: ObjectId,
    pub fast_forward: bool,
}

/// Plans the merge of `task_branch` into `base_branch` as a journaled operation (see
/// [`code_intel_gitstate::journal`]): the result commit is written now; the journal then moves the base ref
/// and HEAD in one transaction, brings the files the merge changed up to date, rewrites the
/// index, deletes the task branch (and `also_delete`, each only if it still points at the commit given), and adds the
/// note. Conflicts, a missing branch, or uncommitted work the merge would overwrite refuse the
/// plan, and nothing changes.
pub fn plan_merge(
    repo: &gix::Repository,
    root: &Path,
    task_branch: &str,
    base_branch: &str,
    note: &str,
    also_delete: &[(String, ObjectId)],
) -> Result<(Merged, Journal), Error> {
    // Whatever a checkpoint says, only a task branch is merged and deleted: never `main` into
    // `release` because a stored session named them so.
    if !task_branch.starts_with(super::TASK_BRANCH_PREFIX) || task_branch == base_branch {
        return Err(Error::Branch(format!(
            "{task_branch} is not a task branch ({}*): only task branches are merged into their base and deleted",
            super::TASK_BRANCH_PREFIX
        )));
    }
    super::not_in_use(repo, base_branch, &format!("merging {task_branch} into it"))?;
    let task_ref = format!("refs/heads/{task_branch}");
    let base_ref = format!("refs/heads/{base_branch}");
    let task_tip = super::ref_id(repo, &task_ref)?.ok_or_else(|| Error::Branch(format!("{task_branch} is gone")))?;
    let base_tip = super::ref_id(repo, &base_ref)?.ok_or_else(|| Error::Branch(format!("{base_branch} is gone")))?;
    let tree_of = |id: ObjectId| super::tree_of(repo, id).map_err(Error::from);
    let task_tree = tree_of(task_tip)?;
    let ancestor = repo.merge_base(base_tip, task_tip).map_err(crate::error::git)?.map(|id| id.detach());
    let (result, fast_forward) = if ancestor == Some(base_tip) {
        (task_tip, true)
    } else {
        let options = repo.tree_merge_options().map_err(crate::error::git)?;
        let labels = gix::merge::blob::builtin_driver::text::Labels {
            ancestor: Some("base".into()),
            current: Some(base_branch.into()),
            other: Some(task_branch.into()),
        };
        let mut outcome = repo.merge_commits(base_tip, task_tip, labels, options.into()).map_err(crate::error::git)?;
        let how = gix::merge::tree::TreatAsUnresolved::default();
        if outcome.tree_merge.has_unresolved_conflicts(how) {
            let paths = outcome
                .tree_merge
                .conflicts
                .iter()
                .filter(|c| c.is_unresolved(how))
                .map(|c| c.ours.location().to_string())
                .collect();
            return Err(Error::MergeConflicts(paths));
        }
        let tree = outcome.tree_merge.tree.write().map_err(crate::error::git)?.detach();
        let message = format!("Merge {task_branch} into {base_branch}");
        (write_commit_with(repo, tree, &[base_tip, task_tip], &message)?, false)
    };
    // The work tree holds the task tip; bring it to the result, but never over uncommitted work.
    let result_tree = tree_of(result)?;
    let tree_move = worktree::TreeMove::plan(repo, root, task_tree, result_tree)?;
    let how = if fast_forward { "Fast-forward" } else { "Merge made by git-code-intel" };
    let refs = vec![
        RefChange {
            name: base_ref.clone(),
            expected: Some(RefValue::Object(base_tip.to_string())),
            new: Some(RefValue::Object(result.to_string())),
            message: format!("merge {task_branch}: {how}"),
        },
        RefChange {
            name: "HEAD".into(),
            expected: Some(RefValue::Symbolic(task_ref.clone())),
            new: Some(RefValue::Symbolic(base_ref)),
            message: format!("checkout: moving from {task_branch} to {base_branch}"),
        },
    ];
    let mut after = tree_move.steps();
    after.push(Step::DeleteRef { name: task_ref, expected: task_tip });
    // Checked again here, under the operation lock: a branch that came into use since it was
    // listed is left alone.
    let in_use = super::branches_in_use(repo)?;
    for (b, tip) in also_delete
        .iter()
        .filter(|(b, _)| b != task_branch && b.starts_with(super::TASK_BRANCH_PREFIX) && !in_use.contains_key(b))
    {
        after.push(Step::DeleteRef { name: format!("refs/heads/{b}"), expected: *tip });
    }
    after.push(Step::Note { commit: result, text: note.to_owned() });
    let journal = Journal::new(format!("merging {task_branch} into {base_branch}"), refs, after);
    Ok((Merged { commit: result, fast_forward }, journal))
}

/// Plans and runs the merge (see [`plan_merge`]) under the operation lock, with no session to
/// record it.
pub fn merge_task(root: &Path, task_branch: &str, base_branch: &str, note: &str) -> Result<Merged, Error> {
    let run = code_intel_gitstate::journal::operate(root, code_intel_gitstate::journal::NO_RECORD, |repo| {
        plan_merge(repo, root, task_branch, base_branch, note, &[])
    });
    run.map(|(merged, _)| merged)
}
