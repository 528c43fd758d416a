//! The walk stamp: what the last walk saw (each directory it entered, the ignore files that rule
//! them, the files it passed over, with their times), so a refresh can tell what changed with
//! one `stat` per directory and indexed file, and list only that.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use super::build::RefreshReport;
use super::{FileMeta, SymbolIndex, store};
use crate::repo::Repo;
use crate::walk;

/// How long before the walk started a directory must have last changed to be trusted by the
/// stamp: file systems stamp times from a coarse clock, so a change made during the walk can
/// carry a time slightly before it.
pub(super) const STAMP_SLACK: std::time::Duration = std::time::Duration::from_secs(1);

/// The walk stamp: each directory walked and the ignore files that rule it, with their times.
/// A directory changed within [`STAMP_SLACK`] of the walk is recorded as untrusted, so the next
/// check lists it again.
pub(super) fn stamp(
    repo: &Repo,
    report: &RefreshReport,
    index: &SymbolIndex,
    walk_started: std::time::SystemTime,
) -> store::WalkStamp {
    let root = repo.root();
    let trusted_before = walk_started.checked_sub(STAMP_SLACK).map_or(i64::MIN, nanos);
    // One stat per directory and ignore file, on every core.
    let per_dir: Vec<(Stamped, Vec<Stamped>)> = report
        .dirs
        .par_iter()
        .filter_map(|dir| {
            let rel = crate::repo::to_slash(dir.strip_prefix(root).ok()?);
            Some((dir_entry(root, &rel, trusted_before), present_ignore_files(root, &rel).collect()))
        })
        .collect();
    let mut dirs: Vec<(String, i64)> = Vec::with_capacity(per_dir.len());
    let mut paths: Vec<(String, i64)> = Vec::with_capacity(per_dir.len() * 2 + 2);
    for (dir, ignores) in per_dir {
        dirs.push(dir);
        paths.extend(ignores);
    }
    let passed_over = report.binary.iter().chain(report.too_large.iter().map(|(rel, _)| rel));
    for file in [crate::config::CONFIG_PATH].into_iter().chain(passed_over.map(String::as_str)) {
        paths.push((file.to_owned(), mtime_of(&root.join(file))));
    }
    paths.push(info_exclude(repo));
    dirs.sort();
    dirs.dedup();
    paths.sort();
    paths.dedup();
    store::WalkStamp {
        index_checksum: index.checksum(),
        dirs,
        paths,
        too_large: report.too_large.clone(),
        binary: report.binary.clone(),
        nested: report.nested.clone(),
        unreadable: report.unreadable.clone(),
    }
}

/// The stamp after a refresh that looked only at what changed: the directories it listed (or
/// found new) stamped again, the others as they were; the ignore files of new directories and
/// the files newly passed over added (replacing what the stamp said of the same paths), and the
/// ignore files of directories no longer walked dropped.
pub(super) fn restamp(
    root: &Path,
    old: &store::WalkStamp,
    changes: &Changes,
    report: &RefreshReport,
    index: &SymbolIndex,
    walk_started: std::time::SystemTime,
) -> Restamp {
    let newly_passed_over = report
        .binary
        .iter()
        .chain(report.too_large.iter().map(|(rel, _)| rel))
        .filter(|rel| !old.binary.contains(rel) && !old.too_large.iter().any(|(r, _)| r == *rel));
    // Only files changed (no directory listed, none newly passed over): the stamp is as it was,
    // for the new index.
    if changes.dirs.is_empty() && newly_passed_over.clone().next().is_none() {
        let stamp = store::WalkStamp {
            index_checksum: index.checksum(),
            too_large: report.too_large.clone(),
            binary: report.binary.clone(),
            nested: report.nested.clone(),
            unreadable: report.unreadable.clone(),
            ..old.clone()
        };
        let same = store::WalkStamp { index_checksum: old.index_checksum, ..stamp.clone() } == *old;
        return if same { Restamp::Repoint(stamp.index_checksum) } else { Restamp::Whole(stamp) };
    }
    let trusted_before = walk_started.checked_sub(STAMP_SLACK).map_or(i64::MIN, nanos);
    let before: HashMap<&str, i64> = old.dirs.iter().map(|(rel, t)| (rel.as_str(), *t)).collect();
    let listed: std::collections::HashSet<&str> = changes.dirs.iter().map(String::as_str).collect();
    let mut dirs = Vec::with_capacity(report.dirs.len());
    let mut paths: std::collections::BTreeMap<String, i64> = old.paths.iter().cloned().collect();
    for dir in &report.dirs {
        let Ok(rel) = dir.strip_prefix(root) else { continue };
        let rel = crate::repo::to_slash(rel);
        match before.get(rel.as_str()) {
            Some(&t) if !listed.contains(rel.as_str()) => dirs.push((rel, t)),
            Some(_) => dirs.push(dir_entry(root, &rel, trusted_before)),
            None => {
                paths.extend(present_ignore_files(root, &rel));
                dirs.push(dir_entry(root, &rel, trusted_before));
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    // An ignore file rules only while its directory is walked.
    paths.retain(|rel, _| {
        !is_ignore_file(rel) || dirs.binary_search_by(|(d, _)| d.as_str().cmp(parent_of(rel))).is_ok()
    });
    for rel in newly_passed_over {
        paths.insert(rel.clone(), mtime_of(&root.join(rel)));
    }
    Restamp::Whole(store::WalkStamp {
        index_checksum: index.checksum(),
        dirs,
        paths: paths.into_iter().collect(),
        too_large: report.too_large.clone(),
        binary: report.binary.clone(),
        nested: report.nested.clone(),
        unreadable: report.unreadable.clone(),
    })
}

/// The stamp after a refresh that looked only at what changed.
pub(super) enum Restamp {
    /// The stamp as it was, for the index with this checksum.
    Repoint([u8; 32]),
    Whole(store::WalkStamp),
}

/// The directory part of a relative path (`""` at the root).
pub(super) fn parent_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// A path with its modification time, as the stamp keeps it.
pub(super) type Stamped = (String, i64);

/// The repository's `info/exclude` with its time, as the stamp keeps it: relative when it lies
/// in the work tree, else absolute (a linked work tree's lies in the main repository).
pub(super) fn info_exclude(repo: &Repo) -> Stamped {
    let path = repo.info_exclude();
    let mtime = mtime_of(&path);
    (repo.relative(&path).unwrap_or_else(|| path.to_string_lossy().into_owned()), mtime)
}

/// A directory's stamp entry: its time, or `i64::MIN` when it changed too recently to trust.
pub(super) fn dir_entry(root: &Path, rel: &str, trusted_before: i64) -> (String, i64) {
    let mtime = dir_mtime_of(&root.join(rel));
    (rel.to_owned(), if mtime >= trusted_before { i64::MIN } else { mtime })
}

/// The ignore files that exist in directory `rel`, with their times. (One that does not exist
/// is not stamped: creating it changes its directory's time, and listing the directory notices
/// it.)
pub(super) fn present_ignore_files<'a>(root: &'a Path, rel: &'a str) -> impl Iterator<Item = (String, i64)> + 'a {
    ignore_files(root, rel).filter(|(_, mtime)| *mtime != -1)
}

/// The ignore files that can rule directory `rel`, with their times (-1: absent).
pub(super) fn ignore_files<'a>(root: &'a Path, rel: &'a str) -> impl Iterator<Item = (String, i64)> + 'a {
    IGNORE_FILES.into_iter().map(move |name| {
        let file = if rel.is_empty() { name.to_owned() } else { format!("{rel}/{name}") };
        let mtime = mtime_of(&root.join(&file));
        (file, mtime)
    })
}

pub(super) fn nanos(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// The modification time of `path` in nanoseconds, -1 when it does not exist.
pub(super) fn mtime_of(path: &Path) -> i64 {
    std::fs::metadata(path).map_or(-1, |m| walk::mtime_ns(&m))
}

/// The modification time of directory `path`, not following a symbolic link (the walk does not
/// enter one): a directory replaced by a link reads as changed. -1 when it does not exist.
pub(super) fn dir_mtime_of(path: &Path) -> i64 {
    std::fs::symlink_metadata(path).map_or(-1, |m| walk::mtime_ns(&m))
}

/// The size and time of a file as the walk sees it: a regular file, not through a symbolic
/// link (the walk passes links over). None for anything else, or nothing.
pub(super) fn regular_file(path: &Path) -> Option<(u64, i64)> {
    std::fs::symlink_metadata(path).ok().filter(std::fs::Metadata::is_file).map(|m| (m.len(), walk::mtime_ns(&m)))
}

/// What changed in the work tree since the stamp was taken, found without listing anything.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// Indexed files (live ids) whose size or time moved, or that are gone.
    pub(super) files: Vec<u32>,
    /// Directories (relative) whose time moved: a file was added, removed or renamed in them.
    pub(super) dirs: Vec<String>,
    /// A file that could not be read can now be opened (or is gone).
    pub(super) retry: bool,
}

impl Changes {
    pub(super) fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dirs.is_empty() && !self.retry
    }
}

/// The changes since `stamp`, with one `stat` per directory, ignore file and indexed file, in
/// parallel. None when the stamp is for another index, or an ignore file, the config, a file
/// passed over or a nested repository's `.git` changed: then only a walk can tell what the
/// index should hold.
pub(super) fn changes_since(root: &Path, index: &SymbolIndex, stamp: &store::WalkStamp) -> Option<Changes> {
    if stamp.index_checksum != index.checksum() {
        return None;
    }
    let started = std::time::Instant::now();
    // The files first: a changed one's language query starts compiling at once, while the rest
    // is checked (and then its file is read).
    let metas: Vec<FileMeta> = index.metas().collect();
    tracing::debug!("index stamp: {} files listed from the index in {:?}", metas.len(), started.elapsed());
    let files: Vec<u32> = metas
        .par_iter()
        .enumerate()
        .filter(|(_, f)| {
            let changed = regular_file(&root.join(f.rel)) != Some((f.size, f.mtime_ns));
            if changed {
                f.lang.compile_query_ahead();
            }
            changed
        })
        .map(|(i, _)| i as u32)
        .collect();
    tracing::debug!("index stamp: files checked in {:?}", started.elapsed());
    // An ignore file that did not exist is not looked for: creating one changes its directory's
    // time, and listing that directory notices it ([`super::delta::Delta::from_changes`]).
    let changed = stamp.paths.par_iter().find_any(|(rel, mtime)| {
        !(*mtime == -1 && is_ignore_file(rel)) && (*mtime == i64::MIN || mtime_of(&root.join(rel)) != *mtime)
    });
    if let Some((rel, _)) = changed {
        tracing::debug!("index stamp: '{rel}' changed since the last walk");
        return None;
    }
    // A directory passed over for its `.git` that lost it is this repository's again.
    if let Some(rel) = stamp.nested.iter().find(|rel| !root.join(rel).join(".git").exists()) {
        tracing::debug!("index stamp: '{rel}' is no longer another repository");
        return None;
    }
    let dirs: Vec<String> = stamp
        .dirs
        .par_iter()
        .filter(|(rel, mtime)| *mtime == i64::MIN || dir_mtime_of(&root.join(rel)) != *mtime)
        .map(|(rel, _)| rel.clone())
        .collect();
    tracing::debug!("index stamp: paths and directories checked in {:?}", started.elapsed());
    // A file's permissions do not move its time: one that could not be read is tried again
    // when it opens.
    let retry = stamp.unreadable.iter().any(|rel| {
        let path = root.join(rel);
        regular_file(&path).is_none() || std::fs::File::open(&path).is_ok()
    });
    if !files.is_empty() || !dirs.is_empty() {
        tracing::debug!(
            "index stamp: {} files and {} directories changed since the last walk",
            files.len(),
            dirs.len()
        );
    }
    Some(Changes { files, dirs, retry })
}

/// The names of the ignore files the walk follows.
pub(super) const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

pub(super) fn is_ignore_file(rel: &str) -> bool {
    IGNORE_FILES.contains(&rel.rsplit('/').next().unwrap_or(rel))
}

/// Whether `rel` is `dir` or lies under it.
pub(super) fn is_under(rel: &str, dir: &str) -> bool {
    rel == dir || (rel.starts_with(dir) && rel.as_bytes().get(dir.len()) == Some(&b'/'))
}
