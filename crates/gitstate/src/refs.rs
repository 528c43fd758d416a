//! Refs and the objects they point at, through gix: compare-and-swap ref edits applied as one
//! transaction under the operation lock, and the commit writer every log, branch and the Map
//! use. Nothing here knows what the refs mean.

use gix::ObjectId;
use gix::bstr::BString;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::{FullName, Target};

use crate::{Error, git};

/// A tree holding one blob, `name`.
pub fn single_file_tree(repo: &gix::Repository, name: &str, blob: ObjectId) -> Result<ObjectId, Error> {
    let tree = gix::objs::Tree {
        entries: vec![gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Blob.into(),
            filename: name.into(),
            oid: blob,
        }],
    };
    Ok(repo.write_object(&tree).map_err(git)?.detach())
}

pub fn write_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    parent: Option<ObjectId>,
    message: &str,
) -> Result<ObjectId, Error> {
    let parents: Vec<ObjectId> = parent.into_iter().collect();
    write_commit_with(repo, tree, &parents, &format!("git-code-intel: {message}"))
}

/// A commit of `tree` with `parents` and exactly `message`, by the configured committer.
pub fn write_commit_with(
    repo: &gix::Repository,
    tree: ObjectId,
    parents: &[ObjectId],
    message: &str,
) -> Result<ObjectId, Error> {
    let sig = signature(repo);
    let mut message = message.trim_end().to_owned();
    message.push('\n');
    let commit = gix::objs::Commit {
        tree,
        parents: parents.iter().copied().collect(),
        author: sig.clone(),
        committer: sig,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    Ok(repo.write_object(&commit).map_err(git)?.detach())
}

/// The configured committer, or `git-code-intel <git-code-intel@localhost>`.
pub fn signature(repo: &gix::Repository) -> gix::actor::Signature {
    match repo.committer() {
        Some(Ok(s)) => s.to_owned().unwrap_or_else(|_| fallback_signature()),
        _ => fallback_signature(),
    }
}

fn fallback_signature() -> gix::actor::Signature {
    gix::actor::Signature {
        name: "git-code-intel".into(),
        email: "git-code-intel@localhost".into(),
        time: gix::date::Time::now_local_or_utc(),
    }
}

/// What a compare-and-swap expects of a ref last seen at `previous`: that it still points there,
/// or (None) that it still does not exist.
pub fn expecting(previous: Option<ObjectId>) -> PreviousValue {
    match previous {
        Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id)),
        None => PreviousValue::MustNotExist,
    }
}

pub fn update(name: &str, expected: PreviousValue, new: Target, message: &str) -> Result<RefEdit, Error> {
    Ok(RefEdit {
        change: Change::Update {
            log: LogChange { mode: RefLog::AndReference, force_create_reflog: true, message: BString::from(message) },
            expected,
            new,
        },
        name: FullName::try_from(name).map_err(git)?,
        deref: false,
    })
}

pub fn delete(name: &str, expected: PreviousValue) -> Result<RefEdit, Error> {
    Ok(RefEdit {
        change: Change::Delete { expected, log: RefLog::AndReference },
        name: FullName::try_from(name).map_err(git)?,
        deref: false,
    })
}

/// Applies `edits` as one transaction, under the operation lock (see [`crate::lock`]): a
/// lock file a dead git-code-intel process left on one of our refs is removed first, and a lock
/// file in the way of any other ref is named in the error. A ref that does not hold the value an
/// edit expects (another process moved it) is [`Error::Conflict`]; any other failure is
/// [`Error::Git`] with git's words, never a conflict.
pub fn apply(repo: &gix::Repository, edits: Vec<RefEdit>) -> Result<(), Error> {
    let _lock = crate::lock::acquire(repo)?;
    let names: Vec<String> = edits.iter().map(|e| e.name.as_bstr().to_string()).collect();
    // An edit that expects the ref to exist finds it gone: another process deleted it.
    let expects_a_value = edits.iter().any(|e| {
        matches!(
            &e.change,
            Change::Update { expected: PreviousValue::MustExist | PreviousValue::MustExistAndMatch(_), .. }
                | Change::Delete { expected: PreviousValue::MustExist | PreviousValue::MustExistAndMatch(_), .. }
        )
    });
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    crate::lock::remove_stale_ref_locks(repo, &names);
    let sig = signature(repo);
    let mut buf = gix::date::parse::TimeBuf::default();
    crate::atomic::failpoint("ref-edit");
    let applied = repo.edit_references_as(edits, Some(sig.to_ref(&mut buf))).map(|_| ()).map_err(|e| {
        if e.is_conflict() || (expects_a_value && e.is_not_found()) {
            return Error::Conflict;
        }
        match crate::lock::lock_in_the_way(repo, &names) {
            Some(lock) => Error::Locked(lock.display().to_string()),
            None => git(e),
        }
    });
    crate::atomic::failpoint("ref-edited");
    applied
}

/// The object `name` points at directly, if the ref exists.
pub fn ref_id(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>, Error> {
    Ok(repo.try_find_reference(name).map_err(git)?.and_then(|r| r.target().try_id().map(ToOwned::to_owned)))
}

/// The tree of commit `id`.
pub fn tree_of(repo: &gix::Repository, id: ObjectId) -> Result<ObjectId, Error> {
    Ok(repo.find_commit(id).map_err(git)?.tree_id().map_err(git)?.detach())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_that_moved_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init(dir.path()).unwrap();
        let one = repo.write_blob(b"one").unwrap().detach();
        let two = repo.write_blob(b"two").unwrap().detach();
        let name = "refs/code-intel/test";
        apply(&repo, vec![update(name, expecting(None), Target::Object(one), "first").unwrap()]).unwrap();
        // Expecting a value it does not hold, or expecting it absent: another process moved it.
        for expected in [expecting(Some(two)), expecting(None)] {
            let e = apply(&repo, vec![update(name, expected, Target::Object(two), "second").unwrap()]).unwrap_err();
            assert!(matches!(e, Error::Conflict), "{e:?}");
        }
        assert_eq!(ref_id(&repo, name).unwrap(), Some(one));
        // Expecting a ref another process deleted.
        let gone = "refs/code-intel/gone";
        let e =
            apply(&repo, vec![update(gone, expecting(Some(one)), Target::Object(two), "third").unwrap()]).unwrap_err();
        assert!(matches!(e, Error::Conflict), "{e:?}");
    }
}
