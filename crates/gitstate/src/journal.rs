//! Crash safety for what git-code-intel changes in a repository.
//!
//! **The journal.** Under the operation lock ([`crate::lock`]), an operation of several steps
//! (for the layer above: a task branch made, a commit, a merge) first writes what it will do to
//! `.git/code-intel/operation.json`, atomically: one ref transaction (the decisive step, all or
//! nothing), then idempotent steps (files brought from one version to another, the index
//! rewritten, a ref deleted, a note added), then the record the layer above hands over (its
//! session checkpoint), which this crate carries without reading.
//! If the process is killed, the next one to take the lock finishes the operation when its ref
//! transaction happened, or drops it when it did not (nothing had changed), and says which.
//!
//! Files of the work tree are written through a temporary file in the same directory and a
//! rename, so a kill never leaves one missing or truncated.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gix::ObjectId;
use gix::objs::tree::EntryKind;
use gix::refs::transaction::PreviousValue;
use serde::{Deserialize, Serialize};

use crate::atomic::{failpoint, write_atomically};
use crate::lock::{lock_in_the_way, ref_lock_path};
use crate::refs::{apply, delete, update};

const JOURNAL_FILE: &str = "code-intel/operation.json";

// ---- The journal ------------------------------------------------------------------------

/// A ref's value, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefValue {
    /// An object id (hex).
    Object(String),
    /// A symbolic ref to this full name.
    Symbolic(String),
}

/// One change of the operation's ref transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefChange {
    pub name: String,
    /// What it must be before (None: must not exist).
    pub expected: Option<RefValue>,
    /// What it becomes (None: deleted).
    pub new: Option<RefValue>,
    pub message: String,
}

/// A blob of a tree, as the journal records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blob {
    #[serde(with = "hex")]
    pub id: ObjectId,
    #[serde(with = "kind")]
    pub kind: EntryKind,
}

/// A step after the ref transaction. Each can run again with the same result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Brings the work-tree file at `path` to `to` (None: removed). A file that holds neither
    /// `from` nor `to` any more was changed since, and is left alone.
    File { path: String, from: Option<Blob>, to: Option<Blob> },
    /// Rewrites the index from `tree`; the files in `differs` keep empty stat data (modified).
    Index {
        #[serde(with = "hex")]
        tree: ObjectId,
        differs: Vec<String>,
    },
    /// Deletes a ref if it still points at `expected`.
    DeleteRef {
        name: String,
        #[serde(with = "hex")]
        expected: ObjectId,
    },
    /// Adds a note to `commit` under `refs/notes/code-intel`.
    Note {
        #[serde(with = "hex")]
        commit: ObjectId,
        text: String,
    },
}

/// An operation, recorded before it starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// What it is, for the user: "merge llm_task_… into main".
    pub what: String,
    pub started_at: String,
    pub pid: u32,
    /// The decisive step: applied as one transaction. The first change tells afterwards
    /// whether it happened.
    pub refs: Vec<RefChange>,
    pub after: Vec<Step>,
    /// The record to write once done, in the form of the layer above that wrote it (a session
    /// checkpoint, say): this crate only carries it to the writer.
    #[serde(alias = "session")]
    pub record: Option<serde_json::Value>,
}

impl Journal {
    pub fn new(what: impl Into<String>, refs: Vec<RefChange>, after: Vec<Step>) -> Journal {
        Journal {
            what: what.into(),
            started_at: chrono::Utc::now().to_rfc3339(),
            pid: std::process::id(),
            refs,
            after,
            record: None,
        }
    }
}

/// What ends an operation: writing the record the journal carries (see [`Journal::record`]). It
/// must succeed once, and do nothing when what it records has moved on already.
pub type RecordWriter<'a> = &'a dyn Fn(&serde_json::Value) -> Result<(), WriterError>;

/// Why the record could not be written, as the writer (a layer above) says.
pub type WriterError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// For operations that carry no record.
pub const NO_RECORD: RecordWriter<'static> = &|_: &serde_json::Value| Ok(());

/// Takes the operation lock, finishes any operation a dead process left, lets `plan` read the
/// repository and describe the operation, and runs it. Returns the plan's value and what the
/// recovery did, if it did anything. The plan's own error comes back as it is; this crate's
/// errors are converted into the caller's.
pub fn operate<T, E: From<crate::Error>>(
    root: &Path,
    record: RecordWriter,
    plan: impl FnOnce(&gix::Repository) -> Result<(T, Journal), E>,
) -> Result<(T, Option<String>), E> {
    let repo = gix::open(root).map_err(crate::git)?;
    let _lock = crate::lock::acquire(&repo)?;
    let recovered = recover(&repo, root, record)?;
    // Read the repository afresh: the recovery may have moved refs and the index.
    let repo = gix::open(root).map_err(crate::git)?;
    let (value, journal) = plan(&repo)?;
    run(&repo, root, &journal, record)?;
    Ok((value, recovered))
}

/// Runs `journal` in the repository (`root` the work tree): recorded, ref transaction, steps,
/// the record (a session checkpoint, say), done. Hold the operation lock around the whole of it (and around the
/// reads that planned it).
pub fn run(repo: &gix::Repository, root: &Path, journal: &Journal, record: RecordWriter) -> Result<(), crate::Error> {
    let git_dir = repo.git_dir().to_owned();
    let path = git_dir.join(JOURNAL_FILE);
    write_atomically(&path, &serde_json::to_vec_pretty(journal).map_err(crate::git)?)
        .map_err(crate::file("write", &path))?;
    failpoint("journal-written");
    if let Err(e) = apply_refs(repo, &journal.refs) {
        code_intel_files::discard(&path);
        let names: Vec<&str> = journal.refs.iter().map(|c| c.name.as_str()).collect();
        return Err(crate::Error::Refused { source: Box::new(e), lock: lock_in_the_way(repo, &names) });
    }
    failpoint("refs-moved");
    finish(repo, root, journal, record).map_err(|e| crate::Error::Incomplete(Box::new(e)))?;
    code_intel_files::discard(&path);
    Ok(())
}

/// The steps after the ref transaction, and the record.
fn finish(
    repo: &gix::Repository,
    root: &Path,
    journal: &Journal,
    record: RecordWriter,
) -> Result<Vec<String>, crate::Error> {
    let mut left_alone = Vec::new();
    for (i, step) in journal.after.iter().enumerate() {
        if let Some(path) = run_step(repo, root, step)? {
            left_alone.push(path);
        }
        failpoint(&format!("step-{i}"));
    }
    if let Some(r) = &journal.record {
        record(r).map_err(crate::Error::Git)?;
    }
    failpoint("session-written");
    Ok(left_alone)
}

/// Finishes or drops an operation a dead process left; says what was done. Hold the operation
/// lock (so the journal's writer is known to be dead).
pub fn recover(repo: &gix::Repository, root: &Path, record: RecordWriter) -> Result<Option<String>, crate::Error> {
    let git_dir = repo.git_dir().to_owned();
    let path = git_dir.join(JOURNAL_FILE);
    let journal: Journal = match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(j) => j,
            Err(e) => {
                // Written atomically, so a torn one cannot exist; an unreadable one is kept
                // aside for a person to look at.
                let aside = aside_name(&path);
                return match std::fs::rename(&path, &aside) {
                    Ok(()) => {
                        Ok(Some(format!("an unreadable operation journal was moved to {}: {e}", aside.display())))
                    }
                    // Left in place, it would be found (and reported moved) by every command.
                    Err(moved) => Err(crate::Error::Invalid(format!(
                        "the operation journal {} is unreadable ({e}) and could not be moved aside to {} ({moved}): \
                         move or delete it, then retry",
                        path.display(),
                        aside.display()
                    ))),
                };
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::file("read", &path)(e)),
    };
    // Locks the dead process left on the refs and the index it was changing.
    remove_own_stale_locks(repo, &journal);
    let happened = match journal.refs.first() {
        Some(first) => current(repo, &first.name)? == first.new,
        None => true,
    };
    let report = if happened {
        let left_alone = finish(repo, root, &journal, record)?;
        let mut text = format!("{} was interrupted after it moved its refs; it has been finished", journal.what);
        if !left_alone.is_empty() {
            text.push_str(&format!(" (left alone, changed since: {})", left_alone.join(", ")));
        }
        text
    } else {
        format!("{} was interrupted before it changed anything; nothing to undo", journal.what)
    };
    std::fs::remove_file(&path).map_err(crate::file("remove", &path))?;
    tracing::warn!("{report}");
    Ok(Some(report))
}

/// Where an unreadable journal is kept for a person: `<journal>.unreadable.json`, or the first
/// of `<journal>.unreadable.1.json` … `.9.json` that is free, so a second one never replaces the
/// first. (With all ten kept, the tenth is replaced.)
pub(crate) fn aside_name(path: &Path) -> std::path::PathBuf {
    let names = std::iter::once(path.with_extension("unreadable.json"))
        .chain((1..KEPT_UNREADABLE).map(|n| path.with_extension(format!("unreadable.{n}.json"))));
    let mut last = None;
    for name in names {
        if name.symlink_metadata().is_err() {
            return name;
        }
        last = Some(name);
    }
    last.unwrap_or_else(|| path.with_extension("unreadable.json"))
}

/// How many unreadable journals are kept aside at most.
pub(crate) const KEPT_UNREADABLE: usize = 10;

/// Lock files of the journal's refs and of the index, created after the journal was written:
/// the dead process's.
fn remove_own_stale_locks(repo: &gix::Repository, journal: &Journal) {
    let started = chrono::DateTime::parse_from_rfc3339(&journal.started_at).map(SystemTime::from).ok();
    let mut candidates: Vec<PathBuf> = journal.refs.iter().map(|c| ref_lock_path(repo, &c.name)).collect();
    // The index is the work tree's own.
    candidates.push(repo.git_dir().join("index.lock"));
    for step in &journal.after {
        if let Step::DeleteRef { name, .. } = step {
            candidates.push(ref_lock_path(repo, name));
        }
    }
    candidates.push(ref_lock_path(repo, crate::NOTES_REF));
    for lock in candidates {
        let made_during = std::fs::metadata(&lock)
            .and_then(|m| m.modified())
            .ok()
            .zip(started)
            .is_some_and(|(modified, started)| modified + Duration::from_secs(1) >= started);
        if made_during && std::fs::remove_file(&lock).is_ok() {
            tracing::warn!("removed {}, left by the interrupted operation", lock.display());
        }
    }
}

fn current(repo: &gix::Repository, name: &str) -> Result<Option<RefValue>, crate::Error> {
    let Some(r) = repo.try_find_reference(name).map_err(crate::git)? else { return Ok(None) };
    Ok(Some(match r.target() {
        gix::refs::TargetRef::Object(id) => RefValue::Object(id.to_string()),
        gix::refs::TargetRef::Symbolic(n) => RefValue::Symbolic(n.as_bstr().to_string()),
    }))
}

fn target(v: &RefValue) -> Result<gix::refs::Target, crate::Error> {
    Ok(match v {
        RefValue::Object(hex) => gix::refs::Target::Object(ObjectId::from_hex(hex.as_bytes()).map_err(crate::git)?),
        RefValue::Symbolic(name) => gix::refs::Target::Symbolic(
            name.as_str().try_into().map_err(|e: gix::validate::reference::name::Error| crate::git(e))?,
        ),
    })
}

fn apply_refs(repo: &gix::Repository, changes: &[RefChange]) -> Result<(), crate::Error> {
    let mut edits = Vec::new();
    for c in changes {
        let expected = match &c.expected {
            None => PreviousValue::MustNotExist,
            Some(v) => PreviousValue::MustExistAndMatch(target(v)?),
        };
        edits.push(
            match &c.new {
                Some(v) => update(&c.name, expected, target(v)?, &c.message),
                None => delete(&c.name, expected),
            }
            .map_err(crate::git)?,
        );
    }
    apply(repo, edits)
}

/// One step; returns the path of a file left alone because it changed since.
fn run_step(repo: &gix::Repository, root: &Path, step: &Step) -> Result<Option<String>, crate::Error> {
    match step {
        Step::File { path, from, to } => {
            let now = crate::worktree::current_blob(repo, root, path)?;
            let now_id = now.map(|b| b.0);
            if now_id == to.map(|b| b.id) {
                return Ok(None);
            }
            if now_id != from.map(|b| b.id) {
                return Ok(Some(path.clone()));
            }
            crate::worktree::restore(repo, root, path, to.map(|b| (b.id, b.kind)))?;
            Ok(None)
        }
        Step::Index { tree, differs } => {
            let differs = differs.iter().cloned().collect();
            crate::worktree::write_index(repo, root, *tree, &differs)?;
            Ok(None)
        }
        Step::DeleteRef { name, expected } => {
            if current(repo, name)? == Some(RefValue::Object(expected.to_string())) {
                let edit = delete(name, PreviousValue::MustExistAndMatch(gix::refs::Target::Object(*expected)))
                    .map_err(crate::git)?;
                apply(repo, vec![edit]).map_err(crate::git)?;
            }
            Ok(None)
        }
        Step::Note { commit, text } => {
            crate::notes::add_note(repo, *commit, text)?;
            Ok(None)
        }
    }
}

mod hex {
    use gix::ObjectId;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&id.to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        let text = String::deserialize(d)?;
        ObjectId::from_hex(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

mod kind {
    use gix::objs::tree::EntryKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(kind: &EntryKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match kind {
            EntryKind::BlobExecutable => "executable",
            EntryKind::Link => "link",
            _ => "blob",
        })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EntryKind, D::Error> {
        Ok(match String::deserialize(d)?.as_str() {
            "executable" => EntryKind::BlobExecutable,
            "link" => EntryKind::Link,
            _ => EntryKind::Blob,
        })
    }
}

impl crate::worktree::TreeMove {
    /// The journal steps that carry out the move: each touched file from its old version to
    /// its new one, then the index.
    pub fn steps(&self) -> Vec<Step> {
        let mut steps: Vec<Step> = self
            .touched
            .iter()
            .map(|p| Step::File {
                path: p.clone(),
                from: blob(self.from.get(p).copied()),
                to: blob(self.to.get(p).copied()),
            })
            .collect();
        steps.push(Step::Index { tree: self.to_tree, differs: self.dirty.iter().cloned().collect() });
        steps
    }
}

/// A tree entry as the journal records it.
pub fn blob(entry: Option<(ObjectId, EntryKind)>) -> Option<Blob> {
    entry.map(|(id, kind)| Blob { id, kind })
}

#[cfg(test)]
mod tests {
    use super::{Journal, KEPT_UNREADABLE, NO_RECORD, aside_name, operate, run};

    #[test]
    fn a_second_unreadable_journal_does_not_replace_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("operation.json");
        assert_eq!(aside_name(&path), dir.path().join("operation.unreadable.json"));
        std::fs::write(dir.path().join("operation.unreadable.json"), "first").unwrap();
        assert_eq!(aside_name(&path), dir.path().join("operation.unreadable.1.json"));
        for n in 1..KEPT_UNREADABLE {
            std::fs::write(dir.path().join(format!("operation.unreadable.{n}.json")), "kept").unwrap();
        }
        let last = dir.path().join(format!("operation.unreadable.{}.json", KEPT_UNREADABLE - 1));
        assert_eq!(aside_name(&path), last);
    }

    /// A journal that cannot be written: the error names the file, keeps the I/O error as its
    /// source, and nothing ran.
    #[test]
    fn a_journal_that_cannot_be_written_names_its_file_and_keeps_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init(dir.path()).unwrap();
        let path = repo.git_dir().join(super::JOURNAL_FILE);
        // A directory where the journal goes.
        std::fs::create_dir_all(path.join("in-the-way")).unwrap();
        let e = run(&repo, dir.path(), &Journal::new("test", vec![], vec![]), NO_RECORD).unwrap_err();
        assert!(matches!(&e, crate::Error::File { what: "write", path: p, .. } if *p == path), "{e:?}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let cause = std::error::Error::source(&e).expect("the cause is kept");
        assert!(cause.downcast_ref::<std::io::Error>().is_some(), "{cause:?}");
    }

    /// The plan's own error comes back as the caller's type, not flattened into text.
    #[test]
    fn the_plans_error_comes_back_as_it_is() {
        #[derive(Debug, PartialEq)]
        enum Mine {
            Planned(&'static str),
            Git(String),
        }
        impl From<crate::Error> for Mine {
            fn from(e: crate::Error) -> Mine {
                Mine::Git(e.to_string())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        gix::init(dir.path()).unwrap();
        let r: Result<((), _), Mine> = operate(dir.path(), NO_RECORD, |_| Err(Mine::Planned("conflicts in a.rs")));
        assert_eq!(r.unwrap_err(), Mine::Planned("conflicts in a.rs"));
        assert!(!dir.path().join(".git").join(super::JOURNAL_FILE).exists());
    }
}
