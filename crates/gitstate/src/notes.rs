//! Git notes under `refs/notes/code-intel`: what a session did, attached to the commit it
//! merged, so `git notes --ref=code-intel show <commit>` shows it.

use gix::ObjectId;
use gix::refs::Target;

use crate::refs::{apply, expecting, ref_id, tree_of, update, write_commit_with};

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
        let expected = expecting(parent);
        let edit =
            update(NOTES_REF, expected, Target::Object(note_commit), "notes: session summary").map_err(crate::git)?;
        if apply(repo, vec![edit]).is_ok() {
            return Ok(());
        }
    }
    Err(crate::Error::Invalid("the notes ref kept changing".into()))
}

/// The note `refs/notes/code-intel` holds on `commit`, read as a note from another clone is (it
/// may have come with a fetch): None when there is none, or it is not a readable note.
pub fn note_on(repo: &gix::Repository, commit: ObjectId) -> Result<Option<String>, crate::Error> {
    let Some(tip) = ref_id(repo, NOTES_REF).map_err(crate::git)? else { return Ok(None) };
    let (mut skipped, mut complete) = (Vec::new(), true);
    let notes = notes_of(repo, tip, &mut skipped, &mut complete).map_err(|e| crate::Error::Invalid(e.to_string()))?;
    let Some(blob) = notes.get(&commit.to_string()) else { return Ok(None) };
    let bytes =
        crate::untrusted::blob(repo, *blob, MAX_NOTE_BYTES).map_err(|e| crate::Error::Invalid(e.to_string()))?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// A notes tree larger than this is not merged (about 120,000 notes).
const MAX_NOTES_TREE_BYTES: u64 = 8 << 20;
/// A note larger than this is left out of a merge.
const MAX_NOTE_BYTES: u64 = 1 << 20;
/// How far a merge looks for a common history before it simply makes a merge commit.
const ANCESTRY_BUDGET: usize = 2_000;

/// The notes of the tree at `commit`, by annotated object (hex): git's flat layout, and the
/// one-level fan-out (`ab/cdef…`) that `git notes` uses for many notes. Entries that are not
/// notes (other names, gitlinks, deeper trees, notes over the size limit) are named in `skipped`.
fn notes_of(
    repo: &gix::Repository,
    commit: ObjectId,
    skipped: &mut Vec<String>,
    complete: &mut bool,
) -> Result<std::collections::BTreeMap<String, ObjectId>, crate::untrusted::Refusal> {
    use crate::untrusted;
    let info = untrusted::commit(repo, commit)?;
    let mut out = std::collections::BTreeMap::new();
    let hex_len = repo.object_hash().len_in_hex();
    let is_hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    let mut add = |name: String, entry: &untrusted::TreeEntry, skipped: &mut Vec<String>, complete: &mut bool| {
        if !entry.is_blob() || name.len() != hex_len || !is_hex(&name) {
            skipped.push(format!("notes: {} is not a note", untrusted::quote(&name, untrusted::QUOTED_CHARS)));
            return;
        }
        match repo.try_find_header(entry.oid) {
            Ok(Some(h)) if h.size() <= MAX_NOTE_BYTES => {
                out.insert(name, entry.oid);
            }
            Ok(Some(_)) => skipped.push(format!("notes: the note of {name} is over {MAX_NOTE_BYTES} bytes")),
            _ => {
                skipped.push(format!("notes: the note of {name} is missing"));
                *complete = false;
            }
        }
    };
    for entry in untrusted::tree(repo, info.tree, MAX_NOTES_TREE_BYTES)? {
        let name = entry.name.to_string();
        if entry.kind == gix::objs::tree::EntryKind::Tree && name.len() == 2 && is_hex(&name) {
            match untrusted::tree(repo, entry.oid, MAX_NOTES_TREE_BYTES) {
                Ok(inner) => {
                    for e in inner {
                        add(format!("{name}{}", e.name), &e, skipped, complete);
                    }
                }
                Err(e) => {
                    if matches!(e, untrusted::Refusal::Missing(_)) {
                        *complete = false;
                    }
                    skipped.push(format!("notes: {}/: {e}", untrusted::quote(&name, untrusted::QUOTED_CHARS)));
                }
            }
        } else {
            add(name, &entry, skipped, complete);
        }
    }
    Ok(out)
}

/// Merges every remote's staged notes (`refs/code-intel-remotes/<remote>/notes/code-intel`) into
/// `refs/notes/code-intel`: the union of both sides' notes, this clone's note kept where both
/// annotate the same commit, in a merge commit with both tips as parents. Returns a note for
/// each entry or tip left out.
pub fn merge_staged(repo: &gix::Repository) -> Result<Vec<String>, crate::Error> {
    let shared = crate::shared::NOTES;
    let mut report = Vec::new();
    for staged in shared.unmerged(repo)? {
        let mut skipped = Vec::new();
        // A notes commit naming an object this store lacks is not made a parent: the history
        // could never be pushed.
        let mut complete = true;
        let theirs = match notes_of(repo, staged.tip, &mut skipped, &mut complete) {
            Ok(n) => Some(n),
            Err(e) => {
                report.push(format!("{} was not merged: {e}", shared.tracking(&staged.remote)));
                None
            }
        };
        // Their commit is taken as it is only when nothing of it was refused.
        let refused_some = !skipped.is_empty();
        let mut done = false;
        for _ in 0..20 {
            let local = ref_id(repo, NOTES_REF)?;
            let mut edits = vec![shared.mark_merged(&staged)?];
            // Their commit must end up in this clone's history (else the next push is refused
            // as not a fast-forward), even when it brings no note that is new here.
            let already = local.is_some_and(|l| {
                l == staged.tip || crate::untrusted::is_ancestor(repo, staged.tip, l, ANCESTRY_BUDGET) == Some(true)
            });
            if let Some(theirs) = theirs.as_ref().filter(|_| !already) {
                let mut ours = match local {
                    Some(l) => notes_of(repo, l, &mut Vec::new(), &mut true).map_err(crate::git)?,
                    None => Default::default(),
                };
                let mut conflicts = false;
                for (object, note) in theirs {
                    match ours.get(object) {
                        Some(mine) if mine != note => {
                            conflicts = true;
                            skipped.push(format!("notes: {object} has a note here already; the remote's is left out"));
                        }
                        Some(_) => {}
                        None => {
                            ours.insert(object.clone(), *note);
                        }
                    }
                }
                let behind = local
                    .is_none_or(|l| crate::untrusted::is_ancestor(repo, l, staged.tip, ANCESTRY_BUDGET) == Some(true));
                let next = if complete && behind && !refused_some && !conflicts && ours.len() == theirs.len() {
                    // Theirs holds every note of ours: take their commit as it is.
                    staged.tip
                } else {
                    let entries = ours
                        .iter()
                        .map(|(name, oid)| gix::objs::tree::Entry {
                            mode: gix::objs::tree::EntryKind::Blob.into(),
                            filename: name.as_str().into(),
                            oid: *oid,
                        })
                        .collect();
                    let tree = repo.write_object(&gix::objs::Tree { entries }).map_err(crate::git)?.detach();
                    let parents: Vec<ObjectId> = local.into_iter().chain(complete.then_some(staged.tip)).collect();
                    write_commit_with(repo, tree, &parents, "Notes merged by git-code-intel").map_err(crate::git)?
                };
                edits.push(update(NOTES_REF, expecting(local), Target::Object(next), "notes: merge a remote's notes")?);
            }
            match apply(repo, edits) {
                Ok(()) => {
                    done = true;
                    break;
                }
                Err(crate::Error::Locked(lock)) => return Err(crate::Error::Locked(lock)),
                Err(_) => continue,
            }
        }
        if !done {
            return Err(crate::Error::Conflict);
        }
        report.extend(skipped);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn staged_notes_merge_by_commit_and_keep_this_clones() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        git(&a, &["init", "-q"]);
        git(&a, &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(&a, &["commit", "-q", "--allow-empty", "-m", "two"]);
        git(dir.path(), &["clone", "-q", a.to_str().unwrap(), b.to_str().unwrap()]);
        let (one, two) = (git(&a, &["rev-parse", "HEAD~1"]), git(&a, &["rev-parse", "HEAD"]));
        let (repo_a, repo_b) = (gix::open(&a).unwrap(), gix::open(&b).unwrap());
        let id = |hex: &str| ObjectId::from_hex(hex.as_bytes()).unwrap();
        add_note(&repo_a, id(&one), "a on one").unwrap();
        add_note(&repo_a, id(&two), "a on two").unwrap();
        add_note(&repo_b, id(&two), "b on two").unwrap();
        let spec = crate::shared::NOTES.fetch_refspec("origin");
        git(&b, &["fetch", "-q", "origin", &spec]);
        let skipped = merge_staged(&repo_b).unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(git(&b, &["notes", "--ref=code-intel", "show", &one]), "a on one");
        assert_eq!(git(&b, &["notes", "--ref=code-intel", "show", &two]), "b on two");
        // Both tips are parents: a's notes are in b's history.
        let parents = git(&b, &["rev-list", "--parents", "-n", "1", NOTES_REF]);
        assert_eq!(parents.split(' ').count(), 3, "{parents}");
        git(&b, &["fsck", "--strict", "--no-progress"]);
    }

    /// A staged tip that brings no new note is still taken into the history, or the next push
    /// would be refused as not a fast-forward.
    #[test]
    fn a_staged_tip_with_nothing_new_still_becomes_an_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        git(&a, &["init", "-q"]);
        git(&a, &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(dir.path(), &["clone", "-q", "--bare", a.to_str().unwrap(), remote.to_str().unwrap()]);
        git(dir.path(), &["clone", "-q", remote.to_str().unwrap(), b.to_str().unwrap()]);
        git(&a, &["remote", "add", "origin", remote.to_str().unwrap()]);
        let one = ObjectId::from_hex(git(&a, &["rev-parse", "HEAD"]).as_bytes()).unwrap();
        let spec = crate::shared::NOTES.fetch_refspec("origin");
        let notes = format!("{NOTES_REF}:{NOTES_REF}");
        let (repo_a, repo_b) = (gix::open(&a).unwrap(), gix::open(&b).unwrap());
        add_note(&repo_a, one, "the note").unwrap();
        git(&a, &["push", "-q", "origin", &notes]);
        // b fetches it, merges (nothing of its own), and a rewrites the remote's tip with a
        // commit holding the same notes.
        git(&b, &["fetch", "-q", "origin", &spec]);
        merge_staged(&repo_b).unwrap();
        let tree = git(&a, &["rev-parse", &format!("{NOTES_REF}^{{tree}}")]);
        let same = git(&a, &["commit-tree", &tree, "-p", NOTES_REF, "-m", "same notes"]);
        git(&a, &["update-ref", NOTES_REF, &same]);
        git(&a, &["push", "-q", "origin", &notes]);
        git(&b, &["fetch", "-q", "origin", &spec]);
        assert!(merge_staged(&repo_b).unwrap().is_empty());
        // b's notes now hold the remote's tip: its push is a fast-forward.
        git(&b, &["merge-base", "--is-ancestor", &same, NOTES_REF]);
        git(&b, &["push", "-q", "origin", &notes]);
    }
}
