//! A refresh whose cost follows what changed.
//!
//! When the walk stamp says what changed ([`super::stamp::changes_since`]), [`Delta::from_changes`]
//! looks at that only: the indexed files whose size or time moved, and the directories whose
//! time moved (listed one level; a directory new to the stamp is walked whole). [`refresh()`]
//! then reads those files and writes the next overlay from the previous one: the files it held,
//! less those that left or changed, plus those parsed now; what the base lost and what was only
//! touched, brought up to date. The files that did not change are not looked at at all.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

use rayon::prelude::*;

use super::build::{self, Outcome, RefreshReport};
use super::format::{self, Record};
use super::stamp::{Changes, ignore_files, is_under, parent_of, regular_file};
use super::{IndexedFile, OverlayMeta, Part, SymbolIndex, store};
use crate::config::Config;
use crate::lang::Lang;
use crate::repo::Repo;
use crate::walk::{self, WalkOptions, WalkedFile};

/// What changed in the tree, as the stamp and a look at the changed directories tell it.
#[derive(Debug, Default)]
pub(super) struct Delta {
    /// The files to read, sorted by path: indexed files that changed and are still regular files,
    /// files new to the index in the listed directories, and files that could not be read before.
    pub(super) files: Vec<WalkedFile>,
    /// Indexed files (live ids) no longer in the tree: gone, no longer regular files, over the
    /// size limit, or under a directory that left the walk.
    pub(super) left: Vec<u32>,
    /// Every file over the size limit: those the stamp knew (unless their directory left), and
    /// those found now.
    pub(super) too_large: Vec<(String, u64)>,
    /// The directories now walked.
    pub(super) dirs: Vec<PathBuf>,
    /// The directories passed over as other repositories.
    pub(super) nested: Vec<String>,
}

impl Delta {
    /// What changed since `stamp`, given its `changes`. The walk's rules hold as they do for a
    /// full walk: links are not followed, and a directory that now holds `.git` is another
    /// repository's (it and everything under it leave the index). None when a changed directory
    /// gained an ignore file: then only a walk can tell.
    pub(super) fn from_changes(
        repo: &Repo,
        config: &Config,
        index: &SymbolIndex,
        stamp: &store::WalkStamp,
        changes: &Changes,
    ) -> Option<Delta> {
        let root = repo.root();
        let known: HashSet<&str> = stamp.dirs.iter().map(|(rel, _)| rel.as_str()).collect();
        let mut listed: Vec<walk::Walk> = Vec::new();
        // Directories no longer walked: gone, no longer directories, or now other repositories.
        let mut gone: Vec<&str> = Vec::new();
        let mut nested: Vec<String> = stamp.nested.clone();
        // Sorted, so a directory comes before those under it.
        for dir in &changes.dirs {
            // Under a directory that left the walk: not walked, whatever it holds now.
            if gone.iter().any(|g| is_under(dir, g)) {
                gone.push(dir.as_str());
                continue;
            }
            let abs = root.join(dir);
            if !std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir()) {
                gone.push(dir.as_str());
                continue;
            }
            // As the walk tells another repository (a `.git` that resolves).
            if !dir.is_empty() && abs.join(".git").exists() {
                gone.push(dir.as_str());
                nested.push(dir.clone());
                continue;
            }
            let appeared = ignore_files(root, dir).filter(|(_, mtime)| *mtime != -1).any(|(rel, _)| {
                stamp
                    .paths
                    .binary_search_by(|(p, _)| p.as_str().cmp(rel.as_str()))
                    .map_or(true, |i| stamp.paths[i].1 == -1)
            });
            if appeared {
                tracing::debug!("index stamp: an ignore file appeared in '{dir}'");
                return None;
            }
            let one_level = WalkOptions { max_depth: Some(1), ..WalkOptions::default() };
            let Ok(level) = walk::walk(repo, config, &abs, &one_level) else { continue };
            // A directory the stamp did not know is new: everything under it is.
            for sub in &level.dirs {
                let rel = sub.strip_prefix(root).map(crate::repo::to_slash).unwrap_or_default();
                if sub != &abs && !known.contains(rel.as_str()) {
                    match walk::walk(repo, config, sub, &WalkOptions::default()) {
                        Ok(w) => listed.push(w),
                        Err(e) => tracing::debug!("walk of new directory {rel}: {e}"),
                    }
                }
            }
            listed.push(level);
        }
        let under_gone = |rel: &str| gone.iter().any(|g| is_under(rel, g));
        let mut delta = Delta::default();
        let mut left: HashSet<u32> = HashSet::new();
        if !gone.is_empty() {
            for (i, meta) in index.metas().enumerate() {
                if under_gone(parent_of(meta.rel)) {
                    left.insert(i as u32);
                }
            }
        }
        for &i in &changes.files {
            let Some(meta) = index.meta(i).filter(|_| !left.contains(&i)) else { continue };
            let abs = root.join(meta.rel);
            match regular_file(&abs) {
                // Gone (or no longer a file): not in the tree.
                None => {
                    left.insert(i);
                }
                Some((size, _)) if size > config.max_file_size => {
                    left.insert(i);
                    delta.too_large.push((meta.rel.to_owned(), size));
                }
                Some((size, mtime_ns)) => {
                    delta.files.push(WalkedFile { abs, rel: meta.rel.to_owned(), size, mtime_ns })
                }
            }
        }
        for rel in &stamp.unreadable {
            let abs = root.join(rel);
            match regular_file(&abs).filter(|_| !under_gone(parent_of(rel))) {
                Some((size, _)) if size > config.max_file_size => delta.too_large.push((rel.clone(), size)),
                Some((size, mtime_ns)) => delta.files.push(WalkedFile { abs, rel: rel.clone(), size, mtime_ns }),
                None => {}
            }
        }
        // The stamp's directories, less those gone (and what was under them), and those listed.
        if listed.is_empty() && gone.is_empty() {
            delta.dirs = stamp.dirs.iter().map(|(rel, _)| root.join(rel)).collect();
        } else {
            let mut dirs: BTreeSet<PathBuf> =
                stamp.dirs.iter().filter(|(rel, _)| !under_gone(rel)).map(|(rel, _)| root.join(rel)).collect();
            for w in listed {
                // An indexed file met again is unchanged, or among the changed files already.
                delta.files.extend(w.files.into_iter().filter(|f| index.position(&f.rel).is_none()));
                delta.too_large.extend(w.too_large);
                dirs.extend(w.dirs);
                nested.extend(w.nested);
            }
            delta.dirs = dirs.into_iter().collect();
        }
        delta.files.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
        delta.files.dedup_by(|a, b| a.rel == b.rel);
        // Files passed over before still are (a change to one walks the tree again), unless
        // their directory left the walk.
        delta.too_large.extend(stamp.too_large.iter().filter(|(rel, _)| !under_gone(parent_of(rel))).cloned());
        delta.too_large.sort();
        delta.too_large.dedup_by(|a, b| a.0 == b.0);
        nested.sort();
        nested.dedup();
        // A nested repository under a directory that left the walk is forgotten with it (a
        // nested repository that is now one is kept: it is what left).
        nested.retain(|n| !gone.iter().any(|g| is_under(n, g) && n != g));
        delta.nested = nested;
        delta.left = left.into_iter().collect();
        delta.left.sort_unstable();
        Some(delta)
    }

    /// The whole tree as a walk would give it: every indexed file that neither changed nor
    /// left (as the index has it), and the files to read.
    pub(super) fn into_tree(self, root: &std::path::Path, index: &SymbolIndex, changes: &Changes) -> walk::Walk {
        let skip: HashSet<u32> = changes.files.iter().chain(&self.left).copied().collect();
        let mut files = self.files;
        for (i, f) in index.metas().enumerate() {
            if !skip.contains(&(i as u32)) {
                files.push(WalkedFile {
                    abs: root.join(f.rel),
                    rel: f.rel.to_owned(),
                    size: f.size,
                    mtime_ns: f.mtime_ns,
                });
            }
        }
        files.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
        walk::Walk { files, too_large: self.too_large, dirs: self.dirs, nested: self.nested }
    }
}

/// Where a file of the next overlay comes from.
enum Entry<'a> {
    /// The previous overlay's file `id`, with its record (its time brought up to date).
    Kept { id: u32, record: Record },
    /// Parsed now.
    New(&'a IndexedFile),
}

/// The next overlay, built from the previous one by the files that changed.
struct NextOverlay<'a> {
    base: &'a format::Opened,
    files: BTreeMap<&'a str, Entry<'a>>,
    /// Base files no longer there.
    removed: BTreeSet<String>,
    /// Base files with the base's content and another time.
    touched: BTreeMap<String, i64>,
}

impl<'a> NextOverlay<'a> {
    fn from(base: &'a format::Opened, overlay: Option<&'a super::Overlay>) -> NextOverlay<'a> {
        let mut files = BTreeMap::new();
        let (mut removed, mut touched) = (BTreeSet::new(), BTreeMap::new());
        if let Some(o) = overlay {
            for (id, record) in o.opened.records.iter().enumerate() {
                files.insert(o.opened.rel(record), Entry::Kept { id: id as u32, record: *record });
            }
            removed.extend(o.meta.removed.iter().cloned());
            touched.extend(o.meta.touched.iter().cloned());
        }
        NextOverlay { base, files, removed, touched }
    }

    fn in_base(&self, rel: &str) -> Option<&'a Record> {
        let id = self.base.records.binary_search_by(|r| self.base.rel(r).cmp(rel)).ok()?;
        self.base.records.get(id)
    }

    /// `rel` is no longer in the tree.
    fn leave(&mut self, rel: &str) {
        self.files.remove(rel);
        self.touched.remove(rel);
        if self.in_base(rel).is_some() {
            self.removed.insert(rel.to_owned());
        }
    }

    /// `rel` is the overlay's `entry` now.
    fn replace(&mut self, rel: &'a str, entry: Entry<'a>) {
        self.touched.remove(rel);
        self.removed.remove(rel);
        self.files.insert(rel, entry);
    }

    /// `rel` is the base's file again, at time `mtime_ns`.
    fn base_again(&mut self, rel: &str, mtime_ns: i64) {
        self.files.remove(rel);
        self.removed.remove(rel);
        match self.in_base(rel) {
            Some(r) if r.mtime_ns != mtime_ns => {
                self.touched.insert(rel.to_owned(), mtime_ns);
            }
            _ => {
                self.touched.remove(rel);
            }
        }
    }
}

/// Brings `previous` (which has a stored base) up to date with `delta`: reads its files (at
/// most a few: a larger change takes the whole refresh, which stores what it parses a segment at
/// a time) and writes the next overlay. The report is the one the whole refresh would give.
pub(super) fn refresh(
    repo: &Repo,
    config: &Config,
    previous: SymbolIndex,
    stamp: &store::WalkStamp,
    delta: Delta,
) -> (SymbolIndex, RefreshReport) {
    let started = std::time::Instant::now();
    let candidates = build::source_candidates(repo, config, delta.files);
    let outcomes: Vec<Outcome> = candidates
        .par_iter()
        .map(|(file, lang)| {
            let before = previous.position(&file.rel).and_then(|i| Some((i, previous.meta(i)?)));
            build::index_file(file, *lang, before.as_ref().map(|(i, m)| (*i, m)), &previous)
        })
        .collect();
    tracing::debug!("index delta: {} files read, {:?}", candidates.len(), started.elapsed());

    let mut report = RefreshReport {
        too_large: delta.too_large,
        dirs: delta.dirs,
        nested: delta.nested,
        ..RefreshReport::default()
    };
    report.too_large.retain(|(rel, _)| Lang::detect(rel.as_ref()).is_some());
    // Passed over as binary before, and unchanged since (else the tree was walked); those in a
    // directory that became another repository left with it.
    let nested = &report.nested;
    report.binary.extend(stamp.binary.iter().filter(|rel| !nested.iter().any(|n| is_under(rel, n))).cloned());

    let (Some(base), overlay) = previous.parts() else {
        return (previous, report);
    };
    let mut next = NextOverlay::from(base, overlay);
    for &i in &delta.left {
        if let Some(meta) = previous.meta(i) {
            next.leave(meta.rel);
            report.removed += 1;
        }
    }
    for (outcome, (file, _)) in outcomes.iter().zip(&candidates) {
        let was_live = || previous.position(&file.rel).is_some();
        match outcome {
            Outcome::Keep(_) => {}
            Outcome::Touch(i, mtime_ns) => match previous.stored(*i) {
                Some((Part::Overlay, id, record, rel)) => {
                    next.replace(rel, Entry::Kept { id, record: Record { mtime_ns: *mtime_ns, ..record } });
                }
                Some((Part::Base, _, _, rel)) => next.base_again(rel, *mtime_ns),
                None => {}
            },
            Outcome::Restore(_, mtime_ns) => next.base_again(&file.rel, *mtime_ns),
            Outcome::New(f) => {
                report.parsed += 1;
                next.replace(&f.rel, Entry::New(f));
            }
            // Stored aside only by the whole refresh.
            Outcome::Segment(..) => {}
            Outcome::Binary(rel) => {
                report.binary.push(rel.clone());
                if was_live() {
                    report.removed += 1;
                }
                next.leave(rel);
            }
            Outcome::Unreadable(rel) => {
                report.unreadable.push(rel.clone());
                if was_live() {
                    report.removed += 1;
                }
                next.leave(rel);
            }
        }
        // A file the index did not hold that still cannot be indexed changes nothing.
        let passed_over = matches!(outcome, Outcome::Binary(_) | Outcome::Unreadable(_)) && !was_live();
        if !matches!(outcome, Outcome::Keep(_)) && !passed_over {
            report.changed = true;
        }
    }
    report.changed |= report.removed > 0;
    report.binary.sort();
    report.binary.dedup();
    if !report.changed {
        report.files = previous.file_count();
        return (previous, report);
    }

    // The overlay's files in path order, each from the previous overlay or parsed now.
    let places: Vec<build::Place> = next
        .files
        .iter()
        .map(|(rel, entry)| match entry {
            Entry::Kept { id, record } => build::Place::Stored { slot: build::OVERLAY, id: *id, record: *record, rel },
            Entry::New(f) => build::Place::New(f),
        })
        .collect();
    let meta = OverlayMeta {
        base: super::opened_checksum(base),
        removed: next.removed.iter().cloned().collect(),
        touched: next.touched.iter().map(|(rel, t)| (rel.clone(), *t)).collect(),
    };
    // The base is not a part of the overlay: its files are left where they are.
    let slots = [None, overlay.map(|o| &o.opened)];
    let (files, ids) = build::plan(&places, &slots, |_| true);
    let parts = build::parts_of(&slots, &ids);
    let written = store::write_overlay(repo.root(), &files, &parts, &meta);
    drop((files, parts, places, next));
    let index = match (written, previous.into_base()) {
        (Ok(overlay), Some(base)) => SymbolIndex::with_overlay(base, overlay),
        (Err(e), _) => {
            tracing::warn!("could not write the index overlay: {e}");
            SymbolIndex::needs_rebuild()
        }
        (_, None) => SymbolIndex::needs_rebuild(),
    };
    report.files = index.file_count();
    tracing::debug!("index delta written, {:?}", started.elapsed());
    (index, report)
}

/// Whether a change this size is read by [`refresh()`] (else the whole refresh, which stores what
/// it parses a segment at a time, takes it).
pub(super) fn is_small(delta: &Delta) -> bool {
    delta.files.len() < build::SEGMENT_FILES
}
