//! Git notes under `refs/notes/code-intel`: what a session did, attached to the commit it
//! merged, so `git notes --ref=code-intel show <commit>` shows it.

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use crate::refs::{apply, ref_id, tree_of, update, write_commit_with};

pub use crate::NOTES_REF;

/// Attaches `text` to `commit` under `refs/notes/code-intel` (git's notes layout: a tree with
/// one blob per annotated commit, named by its hex id), appending to any existing notes.
pub fn add_note(repo: &gix::Repository, commit: ObjectId, text: &str) -> Result<(), crate::Error> {
    for _ in 0..5 {
        let parent = ref_id(repo, NOTES_REF).map_err(crate::git)?;
        let mut editor = match parent {
            Some(p) => {
                let tree = tree_of(repo, p).map_err(crate::git)?;
                repo.edit_tree(tree).map_err(crate::git)?
            }
            None => repo.edit_tree(ObjectId::empty_tree(repo.object_hash())).map_err(crate::git)?,
        };
        let blob = repo.write_blob(text.as_bytes()).map_err(crate::git)?.detach();
        editor.upsert(commit.to_string().as_str(), gix::objs::tree::EntryKind::Blob, blob).map_err(crate::git)?;
        let tree = editor.write().map_err(crate::git)?.detach();
        let parents: Vec<ObjectId> = parent.into_iter().collect();
        let note_commit =
            write_commit_with(repo, tree, &parents, "Notes added by git-code-intel").map_err(crate::git)?;
        let expected = match parent {
            Some(p) => PreviousValue::MustExistAndMatch(Target::Object(p)),
            None => PreviousValue::MustNotExist,
        };
        let edit =
            update(NOTES_REF, expected, Target::Object(note_commit), "notes: session summary").map_err(crate::git)?;
        if apply(repo, vec![edit]).is_ok() {
            return Ok(());
        }
    }
    Err(crate::Error::Git("the notes ref kept changing".into()))
}
