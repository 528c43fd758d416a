//! Append-only JSON logs in git: each record is a commit whose tree holds one JSON file (and,
//! for records this clone seals, a `seal` file beside it), on top of the log's previous tip.
//! Appends are compare-and-swap on the tip, retried when another process appended first, so no
//! record is ever lost to a race.
//!
//! Logs that travel ([`crate::shared`]) are union-merged: a remote's staged tip becomes a second
//! parent of a merge commit that holds no record, so every record of both sides stays reachable
//! and the next push is a fast-forward. Reading walks the whole history breadth first from the
//! tip (never by the dates commits carry),
//! with every object checked and bounded ([`crate::untrusted`]): a record another clone wrote
//! too large, unreadable or not a JSON object is skipped with a note, never failing the rest.
//!
//! Logs: `refs/code-intel/history` (finished sessions), `refs/code-intel/logs/outcomes`
//! (OutcomeLog: what the user said about a session's result), both shared, and
//! `refs/code-intel/logs/decisions` (DecisionLog: each `query` tool plan), this clone's only.

use std::collections::{HashSet, VecDeque};

use gix::ObjectId;
use gix::refs::Target;

use crate::refs::{apply, expecting, update, write_commit, write_commit_with};
use crate::shared::SharedRef;
use crate::untrusted;
use crate::{Error, git};

pub const OUTCOME_LOG: &str = crate::shared::OUTCOMES.local;
pub const DECISION_LOG: &str = "refs/code-intel/logs/decisions";
const RECORD_FILE: &str = "record.json";
/// The file beside a record that holds this clone's seal of it ([`crate::CloneKey`]).
pub const SEAL_FILE: &str = "seal";
/// A record larger than this is not read (ours are a few KB).
pub const MAX_RECORD_BYTES: u64 = 256 * 1024;
const MAX_RECORD_TREE_BYTES: u64 = 4 * 1024;
const MAX_SEAL_BYTES: u64 = 256;
/// How far a merge looks for a common history before it simply makes a merge commit.
const ANCESTRY_BUDGET: usize = 2_000;

/// What an OutcomeLog record's seal is made for: a record whose seal this clone's key verifies
/// was recorded here; any other came from a teammate.
pub const OUTCOME_SEAL: &str = "outcome record";

/// Appends `record` to the log at `log_ref` as `file`, with `seal(bytes)` beside it (a clone
/// key's seal over the record's exact bytes); returns the new tip.
pub fn append_sealed(
    repo: &gix::Repository,
    log_ref: &str,
    record: &serde_json::Value,
    message: &str,
    seal: impl FnOnce(&[u8]) -> String,
) -> Result<ObjectId, Error> {
    let text = serde_json::to_vec_pretty(record).map_err(git)?;
    let blob = repo.write_blob(&text).map_err(git)?.detach();
    let tree = record_tree(repo, RECORD_FILE, blob, Some(&seal(&text)))?;
    append_tree(repo, log_ref, tree, message)
}

/// Appends `record` to the log at `log_ref` as `file`; returns the new tip.
pub fn append_as(
    repo: &gix::Repository,
    log_ref: &str,
    file: &str,
    record: &serde_json::Value,
    message: &str,
) -> Result<ObjectId, Error> {
    let text = serde_json::to_vec_pretty(record).map_err(git)?;
    let blob = repo.write_blob(&text).map_err(git)?.detach();
    let tree = record_tree(repo, file, blob, None)?;
    append_tree(repo, log_ref, tree, message)
}

/// The tree of one record: `file`, and `seal` when given.
pub fn record_tree(repo: &gix::Repository, file: &str, blob: ObjectId, seal: Option<&str>) -> Result<ObjectId, Error> {
    record_tree_with(repo, file, blob, seal, &[])
}

/// [`record_tree`] with more files beside the record (`others`: name and blob), which the
/// record's seal does not cover: a record that must vouch for one names its blob id.
pub fn record_tree_with(
    repo: &gix::Repository,
    file: &str,
    blob: ObjectId,
    seal: Option<&str>,
    others: &[(&str, ObjectId)],
) -> Result<ObjectId, Error> {
    let mut entries = vec![gix::objs::tree::Entry {
        mode: gix::objs::tree::EntryKind::Blob.into(),
        filename: file.into(),
        oid: blob,
    }];
    for (name, oid) in others {
        entries.push(gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Blob.into(),
            filename: (*name).into(),
            oid: *oid,
        });
    }
    if let Some(seal) = seal {
        let seal_blob = repo.write_blob(seal.as_bytes()).map_err(git)?.detach();
        entries.push(gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Blob.into(),
            filename: SEAL_FILE.into(),
            oid: seal_blob,
        });
    }
    entries.sort_by(|a, b| a.filename.cmp(&b.filename));
    Ok(repo.write_object(&gix::objs::Tree { entries }).map_err(git)?.detach())
}

/// Appends a commit of `tree` on top of the log's tip, by compare-and-swap, retried when
/// another process appended first.
fn append_tree(repo: &gix::Repository, log_ref: &str, tree: ObjectId, message: &str) -> Result<ObjectId, Error> {
    for _ in 0..20 {
        let parent = tip(repo, log_ref)?;
        let commit = write_commit(repo, tree, parent, message)?;
        let expected = expecting(parent);
        match apply(repo, vec![update(log_ref, expected, Target::Object(commit), message)?]) {
            Ok(()) => return Ok(commit),
            Err(Error::Locked(lock)) => return Err(Error::Locked(lock)),
            Err(_) => continue,
        }
    }
    Err(Error::Conflict)
}

/// Appends `record` to the log at `log_ref`.
pub fn append(
    repo: &gix::Repository,
    log_ref: &str,
    record: &serde_json::Value,
    message: &str,
) -> Result<ObjectId, Error> {
    append_as(repo, log_ref, RECORD_FILE, record, message)
}

/// The log's tip, if the log exists.
pub fn tip(repo: &gix::Repository, log_ref: &str) -> Result<Option<ObjectId>, Error> {
    Ok(repo.try_find_reference(log_ref).map_err(git)?.and_then(|r| r.target().try_id().map(ToOwned::to_owned)))
}

/// One record as read, with what is needed to tell whose it is.
#[derive(Debug, Clone)]
pub struct LogRecord {
    pub commit: ObjectId,
    /// The record file's exact bytes (what a seal covers).
    pub bytes: Vec<u8>,
    pub value: serde_json::Value,
    /// The `seal` file beside the record, if any.
    pub seal: Option<Vec<u8>>,
}

/// What reading a log found: its newest records, and a note for each one skipped.
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub records: Vec<LogRecord>,
    pub skipped: Vec<String>,
}

/// The newest `limit` records of the log (`file`: the record's file name), nearest the tip
/// first, across every merged history; commits that hold no record (merges) are passed over.
///
/// The walk is breadth first, first parents before the others: it never orders by the dates in
/// the commits, which another clone writes as it likes (a chain dated in the future would
/// otherwise come first and use up the walk). This clone's own records are on its first-parent
/// line (appends go on its tip; a merge keeps its tip as the first parent), so they are reached
/// however long a merged history is. At most `8 × limit + 64` commits are looked at.
pub fn records(repo: &gix::Repository, log_ref: &str, file: &str, limit: usize) -> Result<Records, Error> {
    let mut out = Records::default();
    let Some(start) = tip(repo, log_ref)? else { return Ok(out) };
    let budget = limit.saturating_mul(8).saturating_add(64);
    let mut queue: VecDeque<ObjectId> = VecDeque::from([start]);
    let mut queued: HashSet<ObjectId> = HashSet::from([start]);
    let mut looked_at = 0usize;
    while let Some(id) = queue.pop_front() {
        if out.records.len() >= limit || looked_at >= budget {
            break;
        }
        looked_at += 1;
        let commit = match untrusted::commit(repo, id) {
            Ok(c) => c,
            Err(e) => {
                out.skipped.push(format!("{log_ref}: {e}"));
                continue;
            }
        };
        for parent in &commit.parents {
            if queued.insert(*parent) {
                queue.push_back(*parent);
            }
        }
        match read_record(repo, id, commit.tree, file) {
            Ok(Some(record)) => out.records.push(record),
            Ok(None) => {}
            Err(note) => out.skipped.push(format!("{log_ref}: record {id}: {note}")),
        }
    }
    for note in &out.skipped {
        tracing::warn!("{note}");
    }
    Ok(out)
}

/// The record in commit `id`'s tree, None when the commit holds none (a merge).
fn read_record(repo: &gix::Repository, id: ObjectId, tree: ObjectId, file: &str) -> Result<Option<LogRecord>, String> {
    let entries = untrusted::tree(repo, tree, MAX_RECORD_TREE_BYTES).map_err(|e| e.to_string())?;
    let Some(bytes) = file_in(repo, &entries, file, MAX_RECORD_BYTES)? else { return Ok(None) };
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    if !value.is_object() {
        return Err("not a JSON object".into());
    }
    let seal = entries
        .iter()
        .find(|e| e.name == SEAL_FILE && e.is_blob())
        .and_then(|e| untrusted::blob(repo, e.oid, MAX_SEAL_BYTES).ok());
    Ok(Some(LogRecord { commit: id, bytes, value, seal }))
}

/// The record in commit `commit` (`file`: the record's file name), read and checked as
/// [`records`] reads each; None when the commit holds none.
pub fn record_at(repo: &gix::Repository, commit: ObjectId, file: &str) -> Result<Option<LogRecord>, String> {
    let info = untrusted::commit(repo, commit).map_err(|e| e.to_string())?;
    read_record(repo, commit, info.tree, file)
}

/// The bytes of `file` in commit `commit`'s tree, checked as another clone's objects are: None
/// when the tree has no such file; an error when it is not a file or is over `limit` bytes.
pub fn file_at(repo: &gix::Repository, commit: ObjectId, file: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
    let info = untrusted::commit(repo, commit).map_err(|e| e.to_string())?;
    let entries = untrusted::tree(repo, info.tree, MAX_RECORD_TREE_BYTES).map_err(|e| e.to_string())?;
    file_in(repo, &entries, file, limit)
}

/// The bytes of `file` among a record tree's `entries` (None when there is no such entry), when
/// it is a blob of at most `limit` bytes.
fn file_in(
    repo: &gix::Repository,
    entries: &[untrusted::TreeEntry],
    file: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>, String> {
    let Some(entry) = entries.iter().find(|e| e.name == file) else { return Ok(None) };
    if !entry.is_blob() {
        return Err(format!("{file} is not a file"));
    }
    untrusted::blob(repo, entry.oid, limit).map(Some).map_err(|e| e.to_string())
}

/// The newest `limit` records of the log as JSON values, nearest the tip first.
pub fn read_as(
    repo: &gix::Repository,
    log_ref: &str,
    file: &str,
    limit: usize,
) -> Result<Vec<serde_json::Value>, Error> {
    Ok(records(repo, log_ref, file, limit)?.records.into_iter().map(|r| r.value).collect())
}

pub fn read(repo: &gix::Repository, log_ref: &str, limit: usize) -> Result<Vec<serde_json::Value>, Error> {
    read_as(repo, log_ref, RECORD_FILE, limit)
}

/// Merges every remote's staged tip of the shared log `log` into the local one: nothing to do
/// when the local log already holds it, a fast-forward when the local log is part of it, else a
/// merge commit (no record, both tips as parents). Each merge is one ref transaction with the
/// record of which tip it took in. Returns a note for each staged tip that is not a commit
/// (it is recorded as seen and left out).
pub fn merge_staged(repo: &gix::Repository, log: &SharedRef) -> Result<Vec<String>, Error> {
    let mut notes = Vec::new();
    for staged in log.unmerged(repo)? {
        let tracking = log.tracking(&staged.remote);
        let usable = match untrusted::commit(repo, staged.tip)
            .map(|c| untrusted::complete_tree(repo, c.tree, MAX_RECORD_TREE_BYTES))
        {
            Ok(Ok(())) => true,
            Ok(Err(e)) | Err(e) => {
                // Made a parent, it would make this clone's log one that cannot be pushed.
                notes.push(format!("{tracking} was not merged: {e}"));
                false
            }
        };
        let mut merged = false;
        for _ in 0..20 {
            let local = tip(repo, log.local)?;
            let next = match local {
                _ if !usable => local,
                None => Some(staged.tip),
                Some(l) if l == staged.tip => Some(l),
                Some(l) if untrusted::is_ancestor(repo, staged.tip, l, ANCESTRY_BUDGET) == Some(true) => Some(l),
                Some(l) if untrusted::is_ancestor(repo, l, staged.tip, ANCESTRY_BUDGET) == Some(true) => {
                    Some(staged.tip)
                }
                Some(l) => {
                    let message = format!("git-code-intel: merge {tracking}");
                    // Written, not assumed: `git fsck` wants every tree a commit names present.
                    let empty = repo.write_object(gix::objs::Tree::empty()).map_err(git)?.detach();
                    Some(write_commit_with(repo, empty, &[l, staged.tip], &message)?)
                }
            };
            let mut edits = vec![log.mark_merged(&staged)?];
            if next != local
                && let Some(next) = next
            {
                let expected = expecting(local);
                edits.push(update(log.local, expected, Target::Object(next), &format!("merge {tracking}"))?);
            }
            match apply(repo, edits) {
                Ok(()) => {
                    merged = true;
                    break;
                }
                Err(Error::Locked(lock)) => return Err(Error::Locked(lock)),
                // The local log moved (a record was appended) or another process merged this
                // tip first: read again.
                Err(_) => {
                    if log.unmerged(repo)?.iter().all(|u| u.remote != staged.remote || u.tip != staged.tip) {
                        merged = true;
                        break;
                    }
                }
            }
        }
        if !merged {
            return Err(Error::Conflict);
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::refs::transaction::PreviousValue;

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

    fn notes_of(repo: &gix::Repository) -> Vec<String> {
        read(repo, OUTCOME_LOG, 100)
            .unwrap()
            .iter()
            .map(|r| r["note"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn staged_logs_merge_into_a_union_that_pushes_as_a_fast_forward() {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        git(dir.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
        let clones: Vec<std::path::PathBuf> = ["a", "b"].iter().map(|n| dir.path().join(n)).collect();
        for c in &clones {
            std::fs::create_dir_all(c).unwrap();
            git(c, &["init", "-q"]);
            git(c, &["remote", "add", "origin", remote.to_str().unwrap()]);
        }
        let spec = crate::shared::OUTCOMES.fetch_refspec("origin");
        let push = |c: &std::path::Path| git(c, &["push", "-q", "origin", &format!("{OUTCOME_LOG}:{OUTCOME_LOG}")]);
        let (a, b) = (gix::open(&clones[0]).unwrap(), gix::open(&clones[1]).unwrap());
        let record = |note: &str| serde_json::json!({"note": note});
        append(&a, OUTCOME_LOG, &record("a1"), "a1").unwrap();
        push(&clones[0]);
        append(&b, OUTCOME_LOG, &record("b1"), "b1").unwrap();
        append(&b, OUTCOME_LOG, &record("b2"), "b2").unwrap();
        git(&clones[1], &["fetch", "-q", "origin", &spec]);
        assert_eq!(merge_staged(&b, &crate::shared::OUTCOMES).unwrap(), Vec::<String>::new());
        let mut merged = notes_of(&b);
        merged.sort();
        assert_eq!(merged, ["a1", "b1", "b2"]);
        // Merging the same staged tip again does nothing.
        let merged_tip = tip(&b, OUTCOME_LOG).unwrap();
        merge_staged(&b, &crate::shared::OUTCOMES).unwrap();
        assert_eq!(tip(&b, OUTCOME_LOG).unwrap(), merged_tip);
        // b's merge holds a's tip: the push is a fast-forward, and a, merging it back, simply
        // moves forward.
        push(&clones[1]);
        git(&clones[0], &["fetch", "-q", "origin", &spec]);
        merge_staged(&a, &crate::shared::OUTCOMES).unwrap();
        assert_eq!(tip(&a, OUTCOME_LOG).unwrap(), tip(&b, OUTCOME_LOG).unwrap());
        assert_eq!(notes_of(&a).len(), 3);
        git(&clones[0], &["fsck", "--strict", "--no-progress"]);
    }

    #[test]
    fn a_staged_tip_that_is_not_a_commit_is_noted_and_left_out() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        git(dir.path(), &["remote", "add", "origin", "https://example.com/none.git"]);
        let repo = gix::open(dir.path()).unwrap();
        append(&repo, OUTCOME_LOG, &serde_json::json!({"note": "mine"}), "mine").unwrap();
        let blob = repo.write_blob(b"not a log").unwrap().detach();
        let staged = crate::shared::OUTCOMES.tracking("origin");
        apply(&repo, vec![update(&staged, PreviousValue::Any, Target::Object(blob), "hostile").unwrap()]).unwrap();
        let notes = merge_staged(&repo, &crate::shared::OUTCOMES).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("is a blob, not a commit"), "{notes:?}");
        assert_eq!(notes_of(&repo), ["mine"]);
        assert!(merge_staged(&repo, &crate::shared::OUTCOMES).unwrap().is_empty(), "noted once");
    }
}
