//! The Map in git: learned success patterns under `refs/code-intel/map`. Each commit's tree
//! holds one `<id>.json` per entry; every change is a new commit on the previous tip, written
//! with compare-and-swap (retried when another process changed the Map first). A team shares
//! the Map by pushing and fetching the ref.

use std::path::Path;

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;
use serde::{Deserialize, Serialize};

use crate::Error;
use code_intel_gitstate::refs::{apply, update};

pub const MAP_REF: &str = "refs/code-intel/map";
/// This clone's last Map commit. Outside `refs/code-intel/*`, so no refspec shares or replaces
/// it: it tells whether a fetch replaced Map entries learned here.
pub const LOCAL_REF: &str = "refs/code-intel-local/map";

/// One success pattern: a natural-language request and where the answer turned out to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MapEntry {
    pub id: String,
    /// The request, as the user wrote it.
    pub query: String,
    /// QUERY_FRAME's target_feature.
    #[serde(default)]
    pub target_feature: String,
    /// Symbols the session verified and changed.
    #[serde(default)]
    pub symbols: Vec<String>,
    /// Files the session verified and changed.
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub recorded_at: String,
}

impl MapEntry {
    /// A stable id from the query and the session.
    pub fn make_id(query: &str, session_id: &str) -> String {
        let hash = blake3::hash(format!("{session_id}\n{query}").as_bytes());
        hash.to_hex()[..12].to_owned()
    }
}

fn git<E: std::fmt::Display>(e: E) -> Error {
    Error::Git(e.to_string())
}

pub struct MapStore {
    repo: gix::ThreadSafeRepository,
}

impl MapStore {
    pub fn open(root: &Path) -> Result<MapStore, Error> {
        let repo = gix::open(root).map_err(|e| Error::Git(format!("not a git repository: {e}")))?;
        Ok(MapStore { repo: repo.into_sync() })
    }

    /// The Map's current commit, if there is a Map.
    pub fn tip(&self) -> Result<Option<ObjectId>, Error> {
        Ok(code_intel_gitstate::log::tip(&self.repo.to_thread_local(), MAP_REF)?)
    }

    /// The entries at the current tip, sorted by id (after merging back what a fetch replaced).
    pub fn entries(&self) -> Result<(Option<ObjectId>, Vec<MapEntry>), Error> {
        if let Err(e) = self.reconcile() {
            tracing::warn!("{MAP_REF}: could not merge back entries a fetch replaced: {e}");
        }
        let repo = self.repo.to_thread_local();
        let tip = code_intel_gitstate::log::tip(&repo, MAP_REF)?;
        let Some(id) = tip else { return Ok((None, Vec::new())) };
        Ok((tip, read_entries(&repo, id)?))
    }

    /// Adds (or replaces, by id) `entry`.
    pub fn add(&self, entry: &MapEntry) -> Result<ObjectId, Error> {
        self.change(&format!("map: learn '{}'", short(&entry.query)), |entries| {
            entries.retain(|e| e.id != entry.id);
            entries.push(entry.clone());
            true
        })
    }

    /// Removes the entries with these ids; returns the ids it removed.
    pub fn remove(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        let mut removed = Vec::new();
        self.change("map: remove entries", |entries| {
            removed = entries.iter().filter(|e| ids.contains(&e.id)).map(|e| e.id.clone()).collect();
            entries.retain(|e| !ids.contains(&e.id));
            !removed.is_empty()
        })?;
        Ok(removed)
    }

    /// Applies `edit` to the entries at the tip and commits the result on top of it, retrying
    /// from the new tip when another writer got there first. `edit` returns false for no change.
    ///
    /// When this clone's last Map commit ([`LOCAL_REF`]) is no longer in the Map's history (a
    /// forced fetch replaced the ref with a teammate's Map), the two are merged first, entry by
    /// entry against their merge base, and the commit gets both as parents: nothing learned
    /// here is lost, and the next push is a fast-forward.
    fn change(&self, message: &str, mut edit: impl FnMut(&mut Vec<MapEntry>) -> bool) -> Result<ObjectId, Error> {
        let repo = self.repo.to_thread_local();
        for _ in 0..20 {
            let tip = code_intel_gitstate::log::tip(&repo, MAP_REF)?;
            let mine = code_intel_gitstate::log::tip(&repo, LOCAL_REF)?;
            let lost = match (tip, mine) {
                (Some(t), Some(m)) if t != m && !is_ancestor(&repo, m, t) => Some(m),
                (None, Some(m)) => Some(m),
                _ => None,
            };
            let mut entries = match tip {
                Some(id) => read_entries(&repo, id)?,
                None => Vec::new(),
            };
            if let Some(lost) = lost {
                let base = tip.and_then(|t| merge_base(&repo, t, lost));
                let base_entries = match base {
                    Some(b) => read_entries(&repo, b)?,
                    None => Vec::new(),
                };
                entries = merge_entries(&base_entries, entries, read_entries(&repo, lost)?);
            }
            let edited = edit(&mut entries);
            if !edited && lost.is_none() {
                return tip.ok_or_else(|| Error::Git("the Map is empty".into()));
            }
            let message = if edited { message } else { "map: merge entries a fetch replaced" };
            let tree = write_entries(&repo, &entries)?;
            let parents: Vec<ObjectId> = tip.into_iter().chain(lost).collect();
            let commit = code_intel_gitstate::refs::write_commit_with(
                &repo,
                tree,
                &parents,
                &format!("git-code-intel: {message}"),
            )?;
            let expected = match tip {
                Some(p) => PreviousValue::MustExistAndMatch(Target::Object(p)),
                None => PreviousValue::MustNotExist,
            };
            let edits = vec![
                update(MAP_REF, expected, Target::Object(commit), message)?,
                update(LOCAL_REF, PreviousValue::Any, Target::Object(commit), message)?,
            ];
            if apply(&repo, edits).is_ok() {
                return Ok(commit);
            }
        }
        Err(Error::Git(
            "the Map kept changing under this process (another one writes it at the same time); retry".into(),
        ))
    }

    /// Merges back what a forced fetch replaced (see `MapStore::change`); returns whether it
    /// did. Cheap when nothing was fetched: two ref reads.
    pub fn reconcile(&self) -> Result<bool, Error> {
        let repo = self.repo.to_thread_local();
        let tip = code_intel_gitstate::log::tip(&repo, MAP_REF)?;
        let mine = code_intel_gitstate::log::tip(&repo, LOCAL_REF)?;
        match (tip, mine) {
            (_, None) => Ok(false),
            (Some(t), Some(m)) if t == m => Ok(false),
            (Some(t), Some(m)) if is_ancestor(&repo, m, t) => {
                // A fetch that only added to what this clone wrote: remember the new tip.
                apply(&repo, vec![update(LOCAL_REF, PreviousValue::Any, Target::Object(t), "map: fetched")?])?;
                Ok(false)
            }
            _ => {
                self.change("map: merge entries a fetch replaced", |_| false)?;
                Ok(true)
            }
        }
    }
}

/// Whether `ancestor` is in the history of `of`.
fn is_ancestor(repo: &gix::Repository, ancestor: ObjectId, of: ObjectId) -> bool {
    merge_base(repo, ancestor, of) == Some(ancestor)
}

fn merge_base(repo: &gix::Repository, a: ObjectId, b: ObjectId) -> Option<ObjectId> {
    repo.merge_base(a, b).ok().flatten().map(|id| id.detach())
}

/// A three-way merge of Map entries by id: an entry one side removed since `base` stays
/// removed; an entry either side added or kept stays (`ours`' version when both have it).
fn merge_entries(base: &[MapEntry], ours: Vec<MapEntry>, theirs: Vec<MapEntry>) -> Vec<MapEntry> {
    let in_base = |id: &str| base.iter().any(|e| e.id == id);
    let has = |list: &[MapEntry], id: &str| list.iter().any(|e| e.id == id);
    let mut out: Vec<MapEntry> = ours.iter().filter(|e| !in_base(&e.id) || has(&theirs, &e.id)).cloned().collect();
    for e in &theirs {
        if !has(&ours, &e.id) && !in_base(&e.id) {
            out.push(e.clone());
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

fn short(s: &str) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(60).collect()
}

fn read_entries(repo: &gix::Repository, commit: ObjectId) -> Result<Vec<MapEntry>, Error> {
    let tree = repo.find_commit(commit).map_err(git)?.tree().map_err(git)?;
    let mut out = Vec::new();
    for entry in tree.iter() {
        let entry = entry.map_err(git)?;
        if !entry.filename().ends_with(b".json") {
            continue;
        }
        let blob = repo.find_object(entry.oid()).map_err(git)?;
        match serde_json::from_slice::<MapEntry>(&blob.data) {
            Ok(e) => out.push(e),
            Err(e) => tracing::warn!("{MAP_REF}: skipping unreadable entry {}: {e}", entry.filename()),
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn write_entries(repo: &gix::Repository, entries: &[MapEntry]) -> Result<ObjectId, Error> {
    let mut tree_entries = Vec::with_capacity(entries.len());
    for e in entries {
        let json = serde_json::to_vec_pretty(e).map_err(git)?;
        let blob = repo.write_blob(&json).map_err(git)?.detach();
        tree_entries.push(gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Blob.into(),
            filename: format!("{}.json", e.id).into(),
            oid: blob,
        });
    }
    tree_entries.sort_by(|a, b| a.filename.cmp(&b.filename));
    let tree = gix::objs::Tree { entries: tree_entries };
    Ok(repo.write_object(&tree).map_err(git)?.detach())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> MapEntry {
        MapEntry {
            id: format!("e{i:02}"),
            query: format!("query {i}"),
            target_feature: String::new(),
            symbols: vec![format!("f{i}")],
            files: vec!["src/a.rs".into()],
            session_id: "s".into(),
            recorded_at: String::new(),
        }
    }

    #[test]
    fn concurrent_writers_lose_nothing_and_remove_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
        assert!(ok.success());
        let root = dir.path().to_path_buf();
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let root = root.clone();
                std::thread::spawn(move || {
                    let store = MapStore::open(&root).unwrap();
                    for i in 0..8 {
                        store.add(&entry(w * 10 + i)).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let store = MapStore::open(&root).unwrap();
        let (tip, entries) = store.entries().unwrap();
        assert!(tip.is_some());
        assert_eq!(entries.len(), 16, "compare-and-swap retries keep every entry");
        assert_eq!(store.remove(&["e03".into(), "nope".into()]).unwrap(), vec!["e03".to_owned()]);
        let (_, entries) = store.entries().unwrap();
        assert_eq!(entries.len(), 15);
        assert!(entries.iter().all(|e| e.id != "e03"));
        // Adding an entry again under its id replaces it.
        let mut e = entry(1);
        e.query = "changed".into();
        store.add(&e).unwrap();
        let (_, entries) = store.entries().unwrap();
        assert_eq!(entries.iter().filter(|x| x.id == "e01").map(|x| x.query.as_str()).collect::<Vec<_>>(), ["changed"]);
    }

    fn git(dir: &std::path::Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn ids(store: &MapStore) -> Vec<String> {
        store.entries().unwrap().1.into_iter().map(|e| e.id).collect()
    }

    #[test]
    fn a_forced_fetch_does_not_lose_what_this_clone_learned() {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        git(dir.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
        for clone in [&a, &b] {
            std::fs::create_dir_all(clone).unwrap();
            git(clone, &["init", "-q"]);
            git(clone, &["remote", "add", "origin", remote.to_str().unwrap()]);
        }
        let fetch =
            |clone: &std::path::Path| git(clone, &["fetch", "-q", "origin", "+refs/code-intel/*:refs/code-intel/*"]);
        let push =
            |clone: &std::path::Path| git(clone, &["push", "-q", "origin", "refs/code-intel/map:refs/code-intel/map"]);

        let store_a = MapStore::open(&a).unwrap();
        store_a.add(&entry(1)).unwrap();
        push(&a);
        fetch(&b);
        let store_b = MapStore::open(&b).unwrap();
        assert_eq!(ids(&store_b), ["e01"]);
        store_b.add(&entry(2)).unwrap(); // learned in b, not pushed
        store_a.add(&entry(3)).unwrap();
        store_a.remove(&["e01".into()]).unwrap();
        push(&a);
        fetch(&b); // replaces b's Map with a's
        // e02 (learned here) comes back, e03 arrives, e01 stays removed as a removed it.
        assert_eq!(ids(&store_b), ["e02", "e03"]);
        // The merge has both histories as parents, so pushing it is a fast-forward.
        push(&b);
        fetch(&a);
        assert_eq!(ids(&store_a), ["e02", "e03"]);
        // A fetch that only adds leaves nothing to merge.
        store_a.add(&entry(4)).unwrap();
        push(&a);
        fetch(&b);
        let tip = store_b.tip().unwrap();
        assert_eq!(ids(&store_b), ["e02", "e03", "e04"]);
        assert_eq!(store_b.tip().unwrap(), tip, "no merge commit for a fast-forward fetch");
    }
}
