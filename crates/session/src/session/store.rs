//! Session state in git, through gix: each checkpoint is a commit under
//! `refs/worktree/code-intel/sessions/<id>` whose tree holds `checkpoint.json` and this clone's
//! seal of it; `refs/worktree/code-intel/active` is a symbolic ref to the one active session;
//! finished sessions are appended to `refs/code-intel/history`, sealed too. Every update is a
//! compare-and-swap on the old value, so two processes can never both believe they advanced the
//! same session.
//!
//! Sessions are git's per-work-tree refs (`refs/worktree/`): no refspec we configure carries
//! them, every work tree of a clone has its own, and a checkpoint whose seal does not verify
//! (one that arrived by a fetch of `refs/*`, or was edited by hand) is refused as not this
//! clone's rather than obeyed. The history is shared with the team ([`code_intel_gitstate::shared`]);
//! its sealed records tell this clone's sessions from a teammate's.

use std::path::Path;

use gix::refs::transaction::PreviousValue;
use gix::refs::{FullName, Target};
use gix::{ObjectId, ThreadSafeRepository};

use code_intel_gitstate::CloneKey;
use code_intel_gitstate::refs::{apply, delete, expecting, update, write_commit};
use code_intel_workflow::engine::state::Checkpoint;

use crate::Error;
use crate::error::git;

pub const SESSIONS_PREFIX: &str = "refs/worktree/code-intel/sessions/";
pub const ACTIVE_REF: &str = "refs/worktree/code-intel/active";
pub const HISTORY_REF: &str = code_intel_gitstate::shared::HISTORY.local;
/// The history record of the last session this work tree finished: written in the same
/// transaction as the record, read by `record_outcome` (never found by searching a history that
/// teammates, or a remote, can add to).
pub const LAST_FINISHED_REF: &str = "refs/worktree/code-intel/last-finished";
/// Where versions before per-work-tree sessions kept them: never read as sessions any more
/// (a fetch of `refs/code-intel/*` could write them), removed by `clean`.
pub const LEGACY_SESSIONS_PREFIX: &str = "refs/code-intel/sessions/";
pub const LEGACY_ACTIVE_REF: &str = "refs/code-intel/active";
const CHECKPOINT_FILE: &str = "checkpoint.json";
const RECORD_FILE: &str = "session.json";
/// Beside a history record: the session's report data (docs/REPORT.md); the record names
/// its blob id under `report`, so a sealed record vouches for it.
pub const REPORT_FILE: &str = "report.json";
/// A report file larger than this is not read (a session's payloads are capped well below).
pub const MAX_REPORT_BYTES: u64 = 4 << 20;
/// How far back `last_finished_here` looks when this work tree has no last-finished ref yet.
const LEGACY_LOOKBACK: usize = 50;
/// Seal domains: a seal of one kind of record never verifies another.
pub const CHECKPOINT_SEAL: &str = "session checkpoint";
pub const HISTORY_SEAL: &str = "session history record";

/// A failed ref edit as the session store reports it: another process moved the ref, a lock was
/// in the way, or git could not write it (with git's words: not a conflict to retry).
fn conflict_unless_locked(e: code_intel_gitstate::Error) -> Error {
    // The crate's one conversion says exactly this.
    Error::from(e)
}

/// The active session as stored: the checkpoint and the commit holding it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub commit: ObjectId,
    pub checkpoint: Checkpoint,
}

pub struct SessionStore {
    repo: ThreadSafeRepository,
    /// This clone's key, read on first use.
    key: std::sync::OnceLock<Result<CloneKey, String>>,
}

/// A finished session's record in the history, and whether this clone wrote it.
#[derive(Debug, Clone)]
pub struct Finished {
    pub record: serde_json::Value,
    /// The record's seal verifies: a session of this clone (not a teammate's, fetched).
    pub here: bool,
    /// The history commit holding it.
    pub commit: ObjectId,
}

/// What the history keeps of a session that ends: its record, and its report data.
pub struct Ending<'a> {
    pub record: &'a serde_json::Value,
    pub report: &'a serde_json::Value,
}

impl SessionStore {
    pub fn open(root: &Path) -> Result<SessionStore, Error> {
        let repo = gix::open(root).map_err(|e| Error::NotGit(e.to_string()))?;
        Ok(SessionStore { repo: repo.into_sync(), key: std::sync::OnceLock::new() })
    }

    fn key(&self) -> Result<&CloneKey, Error> {
        self.key
            .get_or_init(|| CloneKey::of(&self.repo()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Git(format!("the clone key: {e}").into()))
    }

    /// The repository the store reads, opened once (the sandbox runner reads the index and the
    /// work trees from it too).
    pub fn repository(&self) -> gix::Repository {
        self.repo()
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
        self.read_checkpoint(&commit, &session_ref).map(Some)
    }

    /// The checkpoint in a session ref's commit, when it carries this clone's seal.
    fn read_checkpoint(&self, commit: &gix::Commit<'_>, session_ref: &str) -> Result<Stored, Error> {
        let tree = commit.tree().map_err(|e| Error::Corrupt(e.to_string()))?;
        let entry = tree
            .find_entry(CHECKPOINT_FILE)
            .ok_or_else(|| Error::Corrupt(format!("no {CHECKPOINT_FILE} in {session_ref}")))?;
        let blob = entry.object().map_err(|e| Error::Corrupt(e.to_string()))?;
        let seal = tree.find_entry(code_intel_gitstate::log::SEAL_FILE).and_then(|e| e.object().ok());
        if !seal.is_some_and(|s| self.key().is_ok_and(|k| k.verifies(CHECKPOINT_SEAL, &blob.data, &s.data))) {
            return Err(Error::Foreign(session_ref.to_owned()));
        }
        let raw: serde_json::Value = serde_json::from_slice(&blob.data).map_err(|e| Error::Corrupt(e.to_string()))?;
        let phase = raw["orchestrator_state"]["phase_state"]["current_phase"].as_str().unwrap_or("");
        if code_intel_workflow::engine::phase::Phase::from_name(phase).is_none() {
            return Err(Error::UnknownPhase(phase.to_owned()));
        }
        let checkpoint: Checkpoint = serde_json::from_value(raw).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(Stored { commit: commit.id, checkpoint })
    }

    /// Creates the session's ref and claims `refs/code-intel/active` in one transaction: if
    /// another session holds it, nothing is written.
    pub fn create(&self, checkpoint: &Checkpoint) -> Result<ObjectId, Error> {
        let repo = self.repo();
        let id = &checkpoint.orchestrator_state.session_id;
        let name = session_ref(id)?;
        let commit = write_checkpoint(&repo, self.key()?, checkpoint, None, &format!("start session {id}"))?;
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
        let commit = write_checkpoint(&repo, self.key()?, checkpoint, Some(previous), message)?;
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
        finish: Option<Ending<'_>>,
        message: &str,
    ) -> Result<(), Error> {
        let repo = self.repo();
        let _lock = code_intel_gitstate::lock::acquire(&repo)?;
        let name = session_ref(&checkpoint.orchestrator_state.session_id)?;
        let current = repo
            .try_find_reference(name.as_bstr())
            .map_err(git)?
            .and_then(|r| r.target().try_id().map(ToOwned::to_owned));
        if current != Some(previous) {
            return Ok(());
        }
        if let Some(ending) = finish {
            self.finish(previous, checkpoint, ending.record, ending.report)
        } else {
            self.save(previous, checkpoint, message).map(|_| ())
        }
    }

    /// Ends the session in one ref transaction: the history ref moves to a new record on top of
    /// its tip, and the session ref and the active claim are deleted, each edit a
    /// compare-and-swap. Either all three happen or none does, so a process that lost a race
    /// (the session moved on, or another record was appended first) leaves no stray record; a
    /// record appended first by someone else is retried on the new tip. `record` is what the
    /// history keeps of the session, `report` its report data (both built by the caller, which
    /// knows what they mean).
    pub fn finish(
        &self,
        previous: ObjectId,
        checkpoint: &Checkpoint,
        record: &serde_json::Value,
        report: &serde_json::Value,
    ) -> Result<(), Error> {
        let repo = self.repo();
        let state = &checkpoint.orchestrator_state;
        let name = session_ref(&state.session_id)?;
        let session_name = name.as_bstr().to_string();
        let tree = self.history_tree(&repo, record, report)?;
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
            let expected_tip = expecting(tip);
            let edits = vec![
                update(HISTORY_REF, expected_tip, Target::Object(commit), &message)?,
                update(LAST_FINISHED_REF, PreviousValue::Any, Target::Object(commit), &message)?,
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

    /// The tree of a history record: the record (naming its report's blob id), sealed, and the
    /// report beside it.
    fn history_tree(
        &self,
        repo: &gix::Repository,
        record: &serde_json::Value,
        report: &serde_json::Value,
    ) -> Result<ObjectId, Error> {
        let report_blob = repo.write_blob(serde_json::to_vec(report).map_err(git)?).map_err(git)?.detach();
        let mut record = record.clone();
        if let Some(fields) = record.as_object_mut() {
            fields.insert("report".into(), report_blob.to_string().into());
        }
        let text = serde_json::to_vec_pretty(&record).map_err(git)?;
        let blob = repo.write_blob(&text).map_err(git)?.detach();
        let seal = self.key()?.seal(HISTORY_SEAL, &text);
        Ok(code_intel_gitstate::log::record_tree_with(
            repo,
            RECORD_FILE,
            blob,
            Some(&seal),
            &[(REPORT_FILE, report_blob)],
        )?)
    }

    /// The finished session `session_id` among the newest `limit` records of the history.
    /// This clone's own record comes first: a teammate's record naming the same id (by chance,
    /// or crafted) never stands in for it.
    pub fn find_finished(&self, session_id: &str, limit: usize) -> Result<Option<Finished>, Error> {
        let mut found: Vec<Finished> =
            self.history(limit)?.into_iter().filter(|f| f.record["session_id"].as_str() == Some(session_id)).collect();
        let own = found.iter().position(|f| f.here).unwrap_or(0);
        Ok((!found.is_empty()).then(|| found.swap_remove(own)))
    }

    /// The finished session [`LAST_FINISHED_REF`] names, sealed or not; else the newest record
    /// of the history (a fresh clone that fetched the team's history has no last-finished ref).
    pub fn last_finished(&self) -> Result<Option<Finished>, Error> {
        let repo = self.repo();
        if let Some(commit) = code_intel_gitstate::refs::ref_id(&repo, LAST_FINISHED_REF)?
            && let Some(r) = code_intel_gitstate::log::record_at(&repo, commit, RECORD_FILE).map_err(Error::Corrupt)?
        {
            let here =
                r.seal.as_deref().is_some_and(|s| self.key().is_ok_and(|k| k.verifies(HISTORY_SEAL, &r.bytes, s)));
            return Ok(Some(Finished { record: r.value, here, commit }));
        }
        Ok(self.history(1)?.into_iter().next())
    }

    /// The report data kept beside a finished session's record: None when the record has none
    /// (sessions finished before reports were kept); an error when it is unreadable or is not
    /// the one the record names.
    pub fn report_of(&self, finished: &Finished) -> Result<Option<serde_json::Value>, Error> {
        let repo = self.repo();
        let Some(bytes) = code_intel_gitstate::log::file_at(&repo, finished.commit, REPORT_FILE, MAX_REPORT_BYTES)
            .map_err(Error::Corrupt)?
        else {
            return Ok(None);
        };
        let id = gix::objs::compute_hash(repo.object_hash(), gix::object::Kind::Blob, &bytes)
            .map_err(|e| Error::Corrupt(e.to_string()))?;
        if finished.record["report"].as_str() != Some(id.to_string().as_str()) {
            return Err(Error::Corrupt(format!(
                "{REPORT_FILE} in {} is not the report its record names",
                finished.commit
            )));
        }
        serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::Corrupt(format!("{REPORT_FILE}: {e}")))
    }

    /// The session `session_id` of this work tree, while it is not finished.
    pub fn unfinished(&self, session_id: &str) -> Result<Option<Stored>, Error> {
        let repo = self.repo();
        let name = session_ref(session_id)?;
        let Some(mut reference) = repo.try_find_reference(name.as_bstr()).map_err(git)? else { return Ok(None) };
        let commit = reference.peel_to_commit().map_err(|e| Error::Corrupt(e.to_string()))?;
        self.read_checkpoint(&commit, &name.as_bstr().to_string()).map(Some)
    }

    /// The newest finished sessions' records, nearest the tip first: this clone's and, after a fetch of
    /// the shared history, its teammates' (staged history merged first).
    pub fn history(&self, limit: usize) -> Result<Vec<Finished>, Error> {
        let repo = self.repo();
        if let Err(e) = code_intel_gitstate::log::merge_staged(&repo, &code_intel_gitstate::shared::HISTORY) {
            tracing::warn!("the fetched session history was not merged: {e}");
        }
        let key = self.key()?;
        let read = code_intel_gitstate::log::records(&repo, HISTORY_REF, RECORD_FILE, limit)?;
        Ok(read
            .records
            .into_iter()
            .map(|r| {
                let here = r.seal.as_deref().is_some_and(|s| key.verifies(HISTORY_SEAL, &r.bytes, s));
                Finished { record: r.value, here, commit: r.commit }
            })
            .collect())
    }

    /// The record of the last session this work tree finished ([`LAST_FINISHED_REF`]), when it
    /// still carries this clone's seal.
    pub fn last_finished_here(&self) -> Result<Option<serde_json::Value>, Error> {
        let repo = self.repo();
        let Some(commit) = code_intel_gitstate::refs::ref_id(&repo, LAST_FINISHED_REF)? else {
            // Sessions finished before this ref existed: the newest record of this clone's near
            // the history's tip.
            let completed = |f: &Finished| f.here && f.record["ended"].as_str().is_none_or(|e| e == "completed");
            return Ok(self.history(LEGACY_LOOKBACK)?.into_iter().find(completed).map(|f| f.record));
        };
        let record = code_intel_gitstate::log::record_at(&repo, commit, RECORD_FILE).map_err(Error::Corrupt)?;
        let key = self.key()?;
        Ok(record
            .filter(|r| r.seal.as_deref().is_some_and(|s| key.verifies(HISTORY_SEAL, &r.bytes, s)))
            .map(|r| r.value))
    }

    /// Removes every session checkpoint of this work tree and the active claim, and the session
    /// refs versions before per-work-tree sessions left. Returns how many sessions it removed.
    /// Each removed session this clone can still read is appended to the history first, as
    /// `ending` words it (the record says it was cleaned), so its report can still be made; in
    /// the same ref transaction as the removal.
    pub fn clean(
        &self,
        ending: &dyn Fn(&Checkpoint, ObjectId) -> (serde_json::Value, serde_json::Value),
    ) -> Result<usize, Error> {
        let repo = self.repo();
        // Under the operation lock, as every other change to a session: no submit advances a
        // session while it is being removed.
        let _lock = code_intel_gitstate::lock::acquire(&repo)?;
        for _ in 0..20 {
            let mut names = Vec::new();
            for prefix in [SESSIONS_PREFIX, LEGACY_SESSIONS_PREFIX] {
                let platform = repo.references().map_err(git)?;
                for r in platform.prefixed(prefix).map_err(git)? {
                    names.push(r.map_err(git)?.name().as_bstr().to_string());
                }
            }
            let mut edits = Vec::new();
            for active in [ACTIVE_REF, LEGACY_ACTIVE_REF] {
                if repo.try_find_reference(active).map_err(git)?.is_some() {
                    edits.push(delete(active, PreviousValue::MustExist)?);
                }
            }
            let before = code_intel_gitstate::log::tip(&repo, HISTORY_REF)?;
            let mut tip = before;
            let mut removed = 0;
            for n in &names {
                // Gone since it was listed (a session that finished meanwhile): nothing to do.
                let Some(reference) = repo.try_find_reference(n.as_str()).map_err(git)? else { continue };
                removed += 1;
                let Some(current) = reference.target().try_id().map(ToOwned::to_owned) else {
                    edits.push(delete(n, PreviousValue::MustExist)?);
                    continue;
                };
                edits.push(delete(n, PreviousValue::MustExistAndMatch(Target::Object(current)))?);
                let readable = repo.find_commit(current).ok().and_then(|c| self.read_checkpoint(&c, n).ok());
                if let Some(stored) = readable {
                    let (record, report) = ending(&stored.checkpoint, stored.commit);
                    let tree = self.history_tree(&repo, &record, &report)?;
                    let message = format!("cleaned session {}", stored.checkpoint.orchestrator_state.session_id);
                    tip = Some(write_commit(&repo, tree, tip, &message)?);
                }
            }
            if let Some(new_tip) = tip.filter(|t| Some(*t) != before) {
                edits.push(update(HISTORY_REF, expecting(before), Target::Object(new_tip), "cleaned sessions")?);
            }
            if edits.is_empty() {
                return Ok(0);
            }
            match apply(&repo, edits) {
                Ok(()) => return Ok(removed),
                Err(code_intel_gitstate::Error::Locked(lock)) => return Err(Error::Locked(lock)),
                // The history moved (another work tree finished a session, a fetch was merged):
                // the records are made again on its new tip.
                Err(_) => continue,
            }
        }
        Err(Error::Conflict)
    }
}

fn session_ref(id: &str) -> Result<FullName, Error> {
    FullName::try_from(format!("{SESSIONS_PREFIX}{id}"))
        .map_err(|e| Error::Git(format!("bad session id '{id}': {e}").into()))
}

fn write_checkpoint(
    repo: &gix::Repository,
    key: &CloneKey,
    checkpoint: &Checkpoint,
    parent: Option<ObjectId>,
    message: &str,
) -> Result<ObjectId, Error> {
    let json = serde_json::to_vec_pretty(checkpoint).map_err(git)?;
    let blob = repo.write_blob(&json).map_err(git)?.detach();
    let seal = key.seal(CHECKPOINT_SEAL, &json);
    let tree = code_intel_gitstate::log::record_tree(repo, CHECKPOINT_FILE, blob, Some(&seal))?;
    Ok(write_commit(repo, tree, parent, message)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_intel_workflow::contract::Contract;

    #[test]
    fn only_a_lost_race_is_a_conflict() {
        use code_intel_gitstate::Error as GitError;
        assert!(matches!(conflict_unless_locked(GitError::Conflict), Error::Conflict));
        assert!(matches!(conflict_unless_locked(GitError::Locked("x.lock".into())), Error::Locked(l) if l == "x.lock"));
        // A ref git could not write is git's error, not a race to retry.
        let e = conflict_unless_locked(GitError::Git("No space left on device".into()));
        assert!(matches!(&e, Error::GitState(g) if g.to_string().contains("No space left")), "{e:?}");
    }
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
        store.finish(first, &cp, &record("a"), &serde_json::json!({})).unwrap();
        assert!(store.active().unwrap().is_none());
        assert_eq!(records(&store), vec![record("a")]);
    }

    #[test]
    fn a_finish_that_lost_the_race_leaves_no_record() {
        let dir = repo();
        let store = SessionStore::open(dir.path()).unwrap();
        let cp = session("a");
        let first = store.create(&cp).unwrap();
        // Another process advanced the session after this one read it.
        let second = store.save(first, &cp, "advanced elsewhere").unwrap();
        assert!(matches!(store.finish(first, &cp, &record("a"), &serde_json::json!({})), Err(Error::Conflict)));
        assert!(records(&store).is_empty(), "no stray history record");
        assert_eq!(store.active().unwrap().map(|s| s.commit), Some(second), "the session is untouched");
        // The process that holds the newest checkpoint finishes it.
        store.finish(second, &cp, &record("a"), &serde_json::json!({})).unwrap();
        assert_eq!(records(&store), vec![record("a")]);
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
        store.finish(first, &cp, &record("a"), &serde_json::json!({})).unwrap();
        assert_eq!(records(&store), vec![record("a"), record("other")]);
        // Only the sealed record is this clone's session.
        let here: Vec<bool> = store.history(10).unwrap().iter().map(|f| f.here).collect();
        assert_eq!(here, [true, false]);
        assert_eq!(store.last_finished_here().unwrap().map(without_report), Some(record("a")));
    }

    /// The history's records, less the blob id of the report each names (what the tests wrote).
    fn records(store: &SessionStore) -> Vec<serde_json::Value> {
        store.history(10).unwrap().into_iter().map(|f| without_report(f.record)).collect()
    }

    fn without_report(mut record: serde_json::Value) -> serde_json::Value {
        if let Some(fields) = record.as_object_mut() {
            fields.remove("report");
        }
        record
    }

    #[test]
    fn a_checkpoint_without_this_clones_seal_is_refused_not_restored() {
        let dir = repo();
        let store = SessionStore::open(dir.path()).unwrap();
        let cp = session("a");
        store.create(&cp).unwrap();
        assert!(store.active().unwrap().is_some());
        // The same checkpoint, written by another clone (another key): same bytes, other seal.
        let other = tempfile::tempdir().unwrap();
        let foreign_key = CloneKey::load_or_create(other.path()).unwrap();
        let repo = gix::open(dir.path()).unwrap();
        let forged = write_checkpoint(&repo, &foreign_key, &cp, None, "forged").unwrap();
        let name = format!("{SESSIONS_PREFIX}a");
        apply(&repo, vec![update(&name, PreviousValue::Any, Target::Object(forged), "forged").unwrap()]).unwrap();
        assert!(matches!(store.active(), Err(Error::Foreign(r)) if r == name));
        // clean removes it.
        assert_eq!(store.clean(&|_, _| (serde_json::json!({}), serde_json::json!({}))).unwrap(), 1);
        assert!(store.active().unwrap().is_none());
    }
}
