//! Append-only JSON logs in git: each record is a commit whose tree holds one JSON file, on top
//! of the log's previous tip. Appends are compare-and-swap on the tip, retried when another
//! process appended first, so no record is ever lost to a race.
//!
//! Logs: `refs/code-intel/history` (finished sessions), `refs/code-intel/logs/outcomes`
//! (OutcomeLog: what the user said about a session's result) and
//! `refs/code-intel/logs/decisions` (DecisionLog: each `query` tool plan).

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use crate::refs::{apply, single_file_tree, update, write_commit};
use crate::{Error, git};

pub const OUTCOME_LOG: &str = "refs/code-intel/logs/outcomes";
pub const DECISION_LOG: &str = "refs/code-intel/logs/decisions";
const RECORD_FILE: &str = "record.json";

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
    let tree = single_file_tree(repo, file, blob)?;
    for _ in 0..20 {
        let parent = tip(repo, log_ref)?;
        let commit = write_commit(repo, tree, parent, message)?;
        let expected = match parent {
            Some(p) => PreviousValue::MustExistAndMatch(Target::Object(p)),
            None => PreviousValue::MustNotExist,
        };
        if apply(repo, vec![update(log_ref, expected, Target::Object(commit), message)?]).is_ok() {
            return Ok(commit);
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

/// The newest `limit` records of the log, newest first (`file`: the record's file name).
pub fn read_as(
    repo: &gix::Repository,
    log_ref: &str,
    file: &str,
    limit: usize,
) -> Result<Vec<serde_json::Value>, Error> {
    let mut out = Vec::new();
    let mut next = tip(repo, log_ref)?;
    while let Some(id) = next {
        if out.len() >= limit {
            break;
        }
        let commit = repo.find_commit(id).map_err(git)?;
        let tree = commit.tree().map_err(git)?;
        if let Some(entry) = tree.find_entry(file) {
            let blob = entry.object().map_err(git)?;
            match serde_json::from_slice(&blob.data) {
                Ok(v) => out.push(v),
                Err(e) => tracing::warn!("{log_ref}: unreadable record in {id}: {e}"),
            }
        }
        next = commit.parent_ids().next().map(|p| p.detach());
    }
    Ok(out)
}

pub fn read(repo: &gix::Repository, log_ref: &str, limit: usize) -> Result<Vec<serde_json::Value>, Error> {
    read_as(repo, log_ref, RECORD_FILE, limit)
}
