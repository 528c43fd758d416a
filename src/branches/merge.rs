//! MERGE: the task branch back into the base it was created from. A base that has not moved
//! is fast-forwarded; otherwise gix makes a real 3-way merge commit. Conflicts, or uncommitted
//! work the merge would overwrite, leave refs, index and work tree untouched. Afterwards HEAD
//! is the base again, only files the merge changed are rewritten, the task branch is deleted,
//! and a note under `refs/notes/code-intel` records the session on the resulting commit.

use std::path::Path;

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::worktree;
use crate::gitstore::{apply, delete, update, write_commit_with};

pub const NOTES_REF: &str = "refs/notes/code-intel";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub commit: ObjectId,
    pub fast_forward: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeError {
    Conflicts(Vec<String>),
    Other(String),
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MergeError::Conflicts(paths) => write!(f, "conflicts in {}", paths.join(", ")),
            MergeError::Other(e) => f.write_str(e),
        }
    }
}

fn other<E: std::fmt::Display>(e: E) -> MergeError {
    MergeError::Other(e.to_string())
}

pub fn merge_task(root: &Path, task_branch: &str, base_branch: &str, note: &str) -> Result<Merged, MergeError> {
    let repo = super::open(root).map_err(other)?;
    let task_ref = format!("refs/heads/{task_branch}");
    let base_ref = format!("refs/heads/{base_branch}");
    let task_tip =
        super::ref_id(&repo, &task_ref).map_err(other)?.ok_or_else(|| other(format!("{task_branch} is gone")))?;
    let base_tip =
        super::ref_id(&repo, &base_ref).map_err(other)?.ok_or_else(|| other(format!("{base_branch} is gone")))?;
    let tree_of = |id: ObjectId| super::tree_of(&repo, id).map_err(other);
    let task_tree = tree_of(task_tip)?;
    let ancestor = repo.merge_base(base_tip, task_tip).map_err(other)?.map(|id| id.detach());
    let (result, fast_forward) = if ancestor == Some(base_tip) {
        (task_tip, true)
    } else {
        let options = repo.tree_merge_options().map_err(other)?;
        let labels = gix::merge::blob::builtin_driver::text::Labels {
            ancestor: Some("base".into()),
            current: Some(base_branch.into()),
            other: Some(task_branch.into()),
        };
        let mut outcome = repo.merge_commits(base_tip, task_tip, labels, options.into()).map_err(other)?;
        let how = gix::merge::tree::TreatAsUnresolved::default();
        if outcome.tree_merge.has_unresolved_conflicts(how) {
            let paths = outcome
                .tree_merge
                .conflicts
                .iter()
                .filter(|c| c.is_unresolved(how))
                .map(|c| c.ours.location().to_string())
                .collect();
            return Err(MergeError::Conflicts(paths));
        }
        let tree = outcome.tree_merge.tree.write().map_err(other)?.detach();
        let message = format!("Merge {task_branch} into {base_branch}");
        (write_commit_with(&repo, tree, &[base_tip, task_tip], &message).map_err(other)?, false)
    };
    // The work tree holds the task tip; bring it to the result, but never over uncommitted work.
    let result_tree = tree_of(result)?;
    let tree_move = worktree::TreeMove::plan(&repo, root, task_tree, result_tree).map_err(other)?;
    let edits = vec![
        update(
            &base_ref,
            PreviousValue::MustExistAndMatch(Target::Object(base_tip)),
            Target::Object(result),
            &format!(
                "merge {task_branch}: {}",
                if fast_forward { "Fast-forward" } else { "Merge made by git-code-intel" }
            ),
        )
        .map_err(other)?,
        update(
            "HEAD",
            PreviousValue::MustExistAndMatch(Target::Symbolic(task_ref.as_str().try_into().map_err(other)?)),
            Target::Symbolic(base_ref.as_str().try_into().map_err(other)?),
            &format!("checkout: moving from {task_branch} to {base_branch}"),
        )
        .map_err(other)?,
    ];
    apply(&repo, edits).map_err(other)?;
    tree_move.apply(&repo, root).map_err(other)?;
    // The task branch goes only if nobody moved it meanwhile.
    apply(&repo, vec![delete(&task_ref, PreviousValue::MustExistAndMatch(Target::Object(task_tip))).map_err(other)?])
        .map_err(other)?;
    add_note(&repo, result, note).map_err(other)?;
    Ok(Merged { commit: result, fast_forward })
}

/// Attaches `text` to `commit` under `refs/notes/code-intel` (git's notes layout: a tree with
/// one blob per annotated commit, named by its hex id), appending to any existing notes.
fn add_note(repo: &gix::Repository, commit: ObjectId, text: &str) -> Result<(), String> {
    for _ in 0..5 {
        let parent = super::ref_id(repo, NOTES_REF)?;
        let mut editor = match parent {
            Some(p) => {
                let tree = super::tree_of(repo, p)?;
                repo.edit_tree(tree).map_err(|e| e.to_string())?
            }
            None => repo.edit_tree(ObjectId::empty_tree(repo.object_hash())).map_err(|e| e.to_string())?,
        };
        let blob = repo.write_blob(text.as_bytes()).map_err(|e| e.to_string())?.detach();
        editor
            .upsert(commit.to_string().as_str(), gix::objs::tree::EntryKind::Blob, blob)
            .map_err(|e| e.to_string())?;
        let tree = editor.write().map_err(|e| e.to_string())?.detach();
        let parents: Vec<ObjectId> = parent.into_iter().collect();
        let note_commit =
            write_commit_with(repo, tree, &parents, "Notes added by git-code-intel").map_err(|e| e.to_string())?;
        let expected = match parent {
            Some(p) => PreviousValue::MustExistAndMatch(Target::Object(p)),
            None => PreviousValue::MustNotExist,
        };
        let edit = update(NOTES_REF, expected, Target::Object(note_commit), "notes: session summary")
            .map_err(|e| e.to_string())?;
        if apply(repo, vec![edit]).is_ok() {
            return Ok(());
        }
    }
    Err("the notes ref kept changing".into())
}
