//! Session state in git, through gix: each checkpoint is a commit under
//! `refs/code-intel/sessions/<id>` whose tree holds `checkpoint.json`; `refs/code-intel/active`
//! is a symbolic ref to the one active session; finished sessions are appended to
//! `refs/code-intel/history`. Every update is a compare-and-swap on the old value and writes a
//! reflog entry, so two processes can never both believe they advanced the same session.

use std::path::Path;

use gix::refs::transaction::PreviousValue;
use gix::refs::{FullName, Target};
use gix::{ObjectId, ThreadSafeRepository};

use code_intel_gitstate::refs::{apply, delete, single_file_tree, update, write_commit};
use code_intel_workflow::engine::state::Checkpoint;

use crate::Error;

pub const SESSIONS_PREFIX: &str = "refs/code-intel/sessions/";
pub const ACTIVE_REF: &str = "refs/code-intel/active";
pub const HISTORY_REF: &str = "refs/code-intel/history";
const CHECKPOINT_FILE: &str = "checkpoint.json";
const RECORD_FILE: &str = "session.json";

fn git<E: std::fmt::Display>(e: E) -> Error {
    Error::Git(e.to_string())
}

/// A failed compare-and-swap means another process moved the ref, unless a lock was in the way.
fn conflict_unless_locked(e: code_intel_gitstate::Error) -> Error {
    match e {
        code_intel_gitstate::Error::Locked(lock) => Error::Locked(lock),
        _ => Error::Conflict,
    }
}

/// The active session as stored: the checkpoint and the commit holding it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub commit: ObjectId,
    pub checkpoint: Checkpoint,
}

pub struct SessionStore {
    repo: ThreadSafeRepository,
}

impl SessionStore {
    pub fn open(root: &Path) -> Result<SessionStore, Error> {
        let repo = gix::open(root).map_err(|e| Error::NotGit(e.to_string()))?;
        Ok(SessionStore { repo: repo.into_sync() })
    }

    fn repo(&self) -> gix::Repository {
        self.repo.to_thread_local()
    }

    /// The session `refs/code-intel/active` points at, if any.
    pub fn active(&self) -> Result<Option<Stored>, Error> {
        let repo = self.repo();
        let Some(active) = repo.try_find_reference(ACTIVE_REF).map_err(git)? else { return Ok(None) };
        let session_ref = match active.target() {
            gix::refs::TargetRef::Symbolic(name) => name.as_bstr().to_string(),
            gix::refs::TargetRef::Object(_) => {
                return Err(Error::Corrupt(format!("{ACTIVE_REF} is not symbolic")));
            }
        };
        // A session finishing in another process deletes its ref just before the claim.
        let mut found = None;
        for _ in 0..10 {
            found = repo.try_find_reference(session_ref.as_str()).map_err(git)?;
            if found.is_some() || repo.try_find_reference(ACTIVE_REF).map_err(git)?.is_none() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let Some(mut reference) = found else {
            if repo.try_find_reference(ACTIVE_REF).map_err(git)?.is_none() {
                return Ok(None);
            }
            return Err(Error::Corrupt(format!("{ACTIVE_REF} points at missing {session_ref}")));
        };
        let commit = reference.peel_to_commit().map_err(|e| Error::Corrupt(e.to_string()))?;
        let tree = commit.tree().map_err(|e| Error::Corrupt(e.to_string()))?;
        let entry = tree
            .find_entry(CHECKPOINT_FILE)
            .ok_or_else(|| Error::Corrupt(format!("no {CHECKPOINT_FILE} in {session_ref}")))?;
        let blob = entry.object().map_err(|e| Error::Corrupt(e.to_string()))?;
        let raw: serde_json::Value = serde_json::from_slice(&blob.data).map_err(|e| Error::Corrupt(e.to_string()))?;
        let phase = raw["orchestrator_state"]["phase_state"]["current_phase"].as_str().unwrap_or("");
        if code_intel_workflow::engine::phase::Phase::from_name(phase).is_none() {
            return Err(Error::UnknownPhase(phase.to_owned()));
        }
        let checkpoint: Checkpoint = serde_json::from_value(raw).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(Some(Stored { commit: commit.id, checkpoint }))
    }

    /// Creates the session's ref and claims `refs/code-intel/active` in one transaction: if
    /// another session holds it, nothing is written.
    pub fn create(&self, checkpoint: &Checkpoint) -> Result<ObjectId, Error> {
        let repo = self.repo();
        let id = &checkpoint.orchestrator_state.session_id;
        let name = session_ref(id)?;
        let commit = write_checkpoint(&repo, checkpoint, None, &format!("start session {id}"))?;
        // The session ref first, so no reader sees the claim point at a ref not written yet.
        let edits = vec![
            update(name.as_bstr().to_string().as_str(), PreviousValue::MustNotExist, Target::Object(commit), "start")?,
            update(ACTIVE_REF, PreviousValue::MustNotExist, Target::Symbolic(name.clone()), "claim active session")?,
        ];
        // A racing process may hold the ref locks for a moment: wait until its session shows up
        // (then this one is refused) or the locks are free again.
        let mut last_error = None;
        for _ in 0..40 {
            match apply(&repo, edits.clone()) {
                Ok(()) => return Ok(commit),
                Err(e) => match self.active() {
                    Ok(Some(other)) => return Err(Error::Busy(other.checkpoint.orchestrator_state.session_id)),
                    _ => last_error = Some(e),
                },
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        Err(last_error.map_or(Error::Conflict, Error::from))
    }

    /// Writes the next checkpoint on top of `previous`; fails with [`Error::Conflict`]
    /// when the session ref has moved since.
    pub fn save(&self, previous: ObjectId, checkpoint: &Checkpoint, message: &str) -> Result<ObjectId, Error> {
        let repo = self.repo();
        let name = session_ref(&checkpoint.orchestrator_state.session_id)?;
        let commit = write_checkpoint(&repo, checkpoint, Some(previous), message)?;
        let edit = update(
            name.as_bstr().to_string().as_str(),
            PreviousValue::MustExistAndMatch(Target::Object(previous)),
            Target::Object(commit),
            message,
        )?;
        apply(&repo, vec![edit]).map_err(conflict_unless_locked)?;
        Ok(commit)
    }

    /// Writes `checkpoint` on top of `previous` (or, with `finish`, ends the session) if the
    /// session ref still points at `previous`; does nothing when it has moved on (the write
    /// happened already, before a kill, or another process advanced the session).
    pub fn advance(
        &self,
        previous: ObjectId,
        checkpoint: &Checkpoint,
        finish: Option<&serde_json::Value>,
        message: &str,
    ) -> Result<(), Error> {
        let repo = self.repo();
        let _lock = code_intel_gitstate::lock::OperationLock::acquire(repo.git_dir())?;
        let name = session_ref(&checkpoint.orchestrator_state.session_id)?;
        let current = repo
            .try_find_reference(name.as_bstr())
            .map_err(git)?
            .and_then(|r| r.target().try_id().map(ToOwned::to_owned));
        if current != Some(previous) {
            return Ok(());
        }
        if let Some(record) = finish {
            self.finish(previous, checkpoint, record)
        } else {
            self.save(previous, checkpoint, message).map(|_| ())
        }
    }

    /// Ends the session in one ref transaction: the history ref moves to a new record on top of
    /// its tip, and the session ref and the active claim are deleted, each edit a
    /// compare-and-swap. Either all three happen or none does, so a process that lost a race
    /// (the session moved on, or another record was appended first) leaves no stray record; a
    /// record appended first by someone else is retried on the new tip. `record` is what the
    /// history keeps of the session (built by the caller, which knows what it means).
    pub fn finish(&self, previous: ObjectId, checkpoint: &Checkpoint, record: &serde_json::Value) -> Result<(), Error> {
        let repo = self.repo();
        let state = &checkpoint.orchestrator_state;
        let name = session_ref(&state.session_id)?;
        let session_name = name.as_bstr().to_string();
        let text = serde_json::to_vec_pretty(record).map_err(git)?;
        let blob = repo.write_blob(&text).map_err(git)?.detach();
        let tree = single_file_tree(&repo, RECORD_FILE, blob)?;
        let message = format!("completed session {}", state.session_id);
        for _ in 0..20 {
            let current = repo
                .try_find_reference(name.as_bstr())
                .map_err(git)?
                .and_then(|r| r.target().try_id().map(ToOwned::to_owned));
            if current != Some(previous) {
                return Err(Error::Conflict);
            }
            let tip = code_intel_gitstate::log::tip(&repo, HISTORY_REF)?;
            let commit = write_commit(&repo, tree, tip, &message)?;
            let expected_tip = match tip {
                Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
                None => PreviousValue::MustNotExist,
            };
            let edits = vec![
                update(HISTORY_REF, expected_tip, Target::Object(commit), &message)?,
                delete(&session_name, PreviousValue::MustExistAndMatch(Target::Object(previous)))?,
                delete(ACTIVE_REF, PreviousValue::MustExistAndMatch(Target::Symbolic(name.clone())))?,
            ];
            match apply(&repo, edits) {
                Ok(()) => return Ok(()),
                Err(code_intel_gitstate::Error::Locked(lock)) => return Err(Error::Locked(lock)),
                // Either the history moved (another session finished: retry on its tip) or the
                // session did (checked at the top of the loop).
                Err(_) => continue,
            }
        }
        Err(Error::Conflict)
    }

    /// The newest finished sessions' records, newest first.
    pub fn history(&self, limit: usize) -> Result<Vec<serde_json::Value>, Error> {
        Ok(code_intel_gitstate::log::read_as(&self.repo(), HISTORY_REF, RECORD_FILE, limit)?)
    }

    /// Removes every session checkpoint and the active claim. Returns how many sessions it removed.
    pub fn clean(&self) -> Result<usize, Error> {
        let repo = self.repo();
        let mut names = Vec::new();
        let platform = repo.references().map_err(git)?;
        for r in platform.prefixed(SESSIONS_PREFIX).map_err(git)?.flatten() {
            names.push(r.name().as_bstr().to_string());
        }
        let mut edits = Vec::new();
        if repo.try_find_reference(ACTIVE_REF).map_err(git)?.is_some() {
            edits.push(delete(ACTIVE_REF, PreviousValue::MustExist)?);
        }
        for n in &names {
            edits.push(delete(n, PreviousValue::MustExist)?);
        }
        if !edits.is_empty() {
            apply(&repo, edits)?;
        }
        Ok(names.len())
    }

    /// The `llm_task_*` branches that exist now.
    pub fn task_branches(&self) -> Result<Vec<String>, Error> {
        let repo = self.repo();
        let platform = repo.references().map_err(git)?;
        let mut out = Vec::new();
        // A ref that cannot be read is an error here, not something to skip: it could be a
        // task branch holding work.
        for r in platform.prefixed("refs/heads/llm_task_").map_err(git)? {
            out.push(r.map_err(git)?.name().shorten().to_string());
        }
        out.sort();
        Ok(out)
    }
}

fn session_ref(id: &str) -> Result<FullName, Error> {
    FullName::try_from(format!("{SESSIONS_PREFIX}{id}")).map_err(|e| Error::Git(format!("bad session id '{id}': {e}")))
}

fn write_checkpoint(
    repo: &gix::Repository,
    checkpoint: &Checkpoint,
    parent: Option<ObjectId>,
    message: &str,
) -> Result<ObjectId, Error> {
    let json = serde_json::to_vec_pretty(checkpoint).map_err(git)?;
    let blob = repo.write_blob(&json).map_err(git)?.detach();
    let tree = single_file_tree(repo, CHECKPOINT_FILE, blob)?;
    Ok(write_commit(repo, tree, parent, message)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_intel_workflow::contract::Contract;
    use code_intel_workflow::engine::state::{Flags, Intent};
    use code_intel_workflow::engine::submit::{StartParams, start};

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        gix::init(dir.path()).unwrap();
        dir
    }

    fn session(id: &str) -> Checkpoint {
        let params = StartParams {
            session_id: id.into(),
            intent: Intent::Investigate,
            query: "how does login work".into(),
            flags: Flags::default(),
            created_at: "2026-11-23T00:00:00Z".into(),
            stale_branches: false,
            verify_commands: Vec::new(),
        };
        start(&Contract::builtin(), params).0
    }

    fn record(id: &str) -> serde_json::Value {
        serde_json::json!({"session_id": id})
    }

    #[test]
    fn finishing_appends_the_record_and_removes_the_session_together() {
        let dir = repo();
        let store = SessionStore::open(dir.path()).unwrap();
        let cp = session("a");
        let first = store.create(&cp).unwrap();
        store.finish(first, &cp, &record("a")).unwrap();
        assert!(store.active().unwrap().is_none());
        let history = store.history(10).unwrap();
        assert_eq!(history, vec![record("a")]);
    }

    #[test]
    fn a_finish_that_lost_the_race_leaves_no_record() {
        let dir = repo();
        let store = SessionStore::open(dir.path()).unwrap();
        let cp = session("a");
        let first = store.create(&cp).unwrap();
        // Another process advanced the session after this one read it.
        let second = store.save(first, &cp, "advanced elsewhere").unwrap();
        assert!(matches!(store.finish(first, &cp, &record("a")), Err(Error::Conflict)));
        assert!(store.history(10).unwrap().is_empty(), "no stray history record");
        assert_eq!(store.active().unwrap().map(|s| s.commit), Some(second), "the session is untouched");
        // The process that holds the newest checkpoint finishes it.
        store.finish(second, &cp, &record("a")).unwrap();
        assert_eq!(store.history(10).unwrap(), vec![record("a")]);
    }

    #[test]
    fn a_history_that_moved_is_appended_to_not_overwritten() {
        let dir = repo();
        let store = SessionStore::open(dir.path()).unwrap();
        let repo = gix::open(dir.path()).unwrap();
        // Another clone's finished session is appended while this one runs.
        code_intel_gitstate::log::append_as(&repo, HISTORY_REF, RECORD_FILE, &record("other"), "other").unwrap();
        let cp = session("a");
        let first = store.create(&cp).unwrap();
        store.finish(first, &cp, &record("a")).unwrap();
        assert_eq!(store.history(10).unwrap(), vec![record("a"), record("other")]);
    }
}
