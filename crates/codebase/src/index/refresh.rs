//! Bringing the symbol index up to date with the work tree.
//!
//! A file whose size and modification time are unchanged is trusted as it is. Any other file is
//! read and fingerprinted with blake3; only when the fingerprint differs is it parsed again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use std::path::Path;

use super::build::{BASE, OVERLAY, Outcome, Place, SEGMENT_FILES, index_file, parts_of, plan, source_candidates};
pub use super::build::{FastPath, RefreshReport};
use super::delta::{self, Delta};
use super::format::{self, Source};
use super::stamp::{self, Changes};
use super::{FileMeta, IndexedFile, OverlayMeta, Part, SymbolIndex, store};
use crate::config::Config;
use crate::lang::Lang;
use crate::repo::Repo;
use crate::syntax;
use crate::walk::{self, WalkOptions, WalkedFile};

/// What a lookup needs from the index. Before the index exists, a lookup that names what it
/// needs is answered from the files that can matter ([`refresh_subset`]) instead of waiting
/// for the whole index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The whole index (a listing of every file's symbols, say).
    All,
    /// The files whose bytes contain one of these words; `ignore_case` for substring lookups.
    Words { words: Vec<String>, ignore_case: bool },
    /// Like `Words`, for a lookup of definitions only: identifier occurrences are not extracted.
    Definitions { words: Vec<String>, ignore_case: bool },
    /// The source files at or under these repository-relative paths.
    Paths(Vec<String>),
}

/// Below this many files to parse, no progress is printed.
const PROGRESS_THRESHOLD: usize = 500;

/// The slots of segments: segment `k` is at `SEGMENT + k` ([`Place::Stored`]).
const SEGMENT: usize = 2;

/// The stored indexes a refresh can keep files from, by slot.
fn slots_of<'a>(
    base: Option<&'a format::Opened>,
    overlay: Option<&'a super::Overlay>,
    segments: &'a Segments,
) -> Vec<Option<&'a format::Opened>> {
    let mut slots = vec![base, overlay.map(|o| &o.opened)];
    slots.extend(segments.opened().map(Some));
    slots
}

/// How much source a segment holds (a few bytes in the unit tests).
#[cfg(not(test))]
const SEGMENT_BYTES: u64 = 16 << 20;
#[cfg(test)]
const SEGMENT_BYTES: u64 = 100;

/// Parsed files stored aside, a batch at a time, while a large refresh runs: each an index of
/// its own (`segment<k>.idx.tmp.<pid>` in the index directory, mapped), merged into the base at
/// the end and removed when dropped.
struct Segments {
    dir: std::path::PathBuf,
    stored: Vec<(std::path::PathBuf, format::Opened)>,
}

impl Segments {
    fn new(root: &Path) -> Segments {
        Segments { dir: store::index_dir(root), stored: Vec::new() }
    }

    fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    fn opened(&self) -> impl Iterator<Item = &format::Opened> {
        self.stored.iter().map(|(_, o)| o)
    }

    /// Takes the result of [`write_segment`]: its outcomes then point into the segment it
    /// stored (numbered after those already taken).
    fn take(&mut self, (mut outcomes, stored): (Vec<Outcome>, Option<Stored>)) -> Vec<Outcome> {
        if let Some(stored) = stored {
            let segment = self.stored.len() as u32;
            for outcome in &mut outcomes {
                if let Outcome::Segment(s, _) = outcome {
                    *s = segment;
                }
            }
            self.stored.push(stored);
        }
        outcomes
    }

    /// File `id` of `segment`: its record and path.
    fn record(&self, segment: u32, id: u32) -> Option<(format::Record, &str)> {
        let (_, o) = self.stored.get(segment as usize)?;
        let r = o.records.get(id as usize)?;
        Some((*r, o.rel(r)))
    }
}

/// A segment on disk and mapped.
type Stored = (std::path::PathBuf, format::Opened);

/// Stores the files parsed in `outcomes` as a segment (`segment<n>.idx.tmp.<pid>` in `dir`)
/// and returns the outcomes with those files pointing into it (as [`Segments::take`] numbers
/// it); when it cannot be stored, they stay in memory.
fn write_segment(dir: &Path, n: usize, mut outcomes: Vec<Outcome>) -> (Vec<Outcome>, Option<Stored>) {
    let parsed: Vec<&IndexedFile> =
        outcomes.iter().filter_map(|o| if let Outcome::New(f) = o { Some(&**f) } else { None }).collect();
    if parsed.is_empty() {
        return (outcomes, None);
    }
    let sources: Vec<Source> = parsed.iter().map(|f| f.as_source()).collect();
    let path = dir.join(format!("segment{n}.idx"));
    let written = crate::derived::ensure_ignored_dir(dir).and_then(|()| {
        crate::derived::write_aside(&path, |file| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            format::write(&mut out, &sources, &[], &[])?;
            out.into_inner().map_err(|e| e.into_error())?;
            Ok(())
        })
    });
    drop(sources);
    drop(parsed);
    let stored = written.and_then(|aside| {
        let mapped = std::fs::File::open(&aside)
            // SAFETY: the segment is this process's own file, written once and never changed.
            .and_then(|f| unsafe { memmap2::Mmap::map(&f) })
            .ok()
            .and_then(|map| format::open(format::Backing::Mapped(map)));
        match mapped {
            Some(opened) => Ok((aside, opened)),
            None => {
                crate::derived::discard(&aside);
                Err(std::io::Error::other("a segment does not read back"))
            }
        }
    });
    match stored {
        Ok(stored) => {
            let mut id = 0;
            for outcome in &mut outcomes {
                if matches!(outcome, Outcome::New(_)) {
                    *outcome = Outcome::Segment(0, id);
                    id += 1;
                }
            }
            // The segment's syntax was freed just now: hand that memory back, so the next
            // segment does not stack on this one's leftovers.
            super::release_free_memory();
            (outcomes, Some(stored))
        }
        Err(e) => {
            tracing::warn!("could not store a segment of the index aside ({e}); keeping it in memory");
            (outcomes, None)
        }
    }
}

/// `candidates` cut into runs of about `bytes` of source each (by the files' sizes).
fn runs_of(candidates: &[(WalkedFile, Lang)], bytes: u64) -> Vec<&[(WalkedFile, Lang)]> {
    let mut runs = Vec::new();
    let (mut start, mut sum) = (0, 0u64);
    for (i, (f, _)) in candidates.iter().enumerate() {
        sum += f.size;
        if sum >= bytes {
            runs.push(&candidates[start..=i]);
            (start, sum) = (i + 1, 0);
        }
    }
    if start < candidates.len() {
        runs.push(&candidates[start..]);
    }
    runs
}

impl Segments {
    /// Removes every segment this process stored, those a writer that died left included.
    fn discard_all(&mut self) {
        for (path, _) in self.stored.drain(..) {
            crate::derived::discard(path);
        }
        let suffix = format!(".idx.tmp.{}", std::process::id());
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| n.starts_with("segment") && n.ends_with(&suffix)) {
                crate::derived::discard(entry.path());
            }
        }
    }
}

impl Drop for Segments {
    fn drop(&mut self) {
        for (path, _) in self.stored.drain(..) {
            crate::derived::discard(path);
        }
    }
}

/// Brings `previous` up to date with the work tree, re-parsing only files whose content
/// changed. What changed goes into the overlay (only the changed files are written; the base
/// is untouched), and a lookup merges the two. With `whole`, the result is stored as one base
/// instead (compacting any overlay): what `git code-intel index` and a build from nothing do.
/// When nothing changed (and not `whole`), `previous` comes back as it was.
///
/// The walk stamp (each directory walked and each ignore file, with its time) tells a refresh
/// what changed with one `stat` per directory and indexed file, in parallel: when nothing did,
/// nothing else is done; when files changed or directories gained or lost entries, only those
/// files and directories are looked at; only a change to an ignore file, the config or a file
/// passed over walks the tree again. (A global git excludes file is not watched: after
/// changing it, run `git code-intel index`.)
pub fn refresh(repo: &Repo, config: &Config, previous: SymbolIndex, whole: bool) -> (SymbolIndex, RefreshReport) {
    let started = Instant::now();
    let (previous, whole) = with_stored_base(repo.root(), previous, whole);
    // Made before the walk: creating `.code-intel/` changes the root directory's time, which
    // would make this walk's stamp distrust the root.
    if let Err(e) = crate::derived::ensure_ignored_dir(&store::index_dir(repo.root())) {
        tracing::debug!("index directory: {e}");
    }
    let walk_started = std::time::SystemTime::now();
    // When the stamp says what changed, only that is looked at; otherwise the tree is walked.
    let stamp_before = if whole || previous.file_count() == 0 { None } else { store::load_stamp(repo.root()) };
    tracing::debug!("index stamp loaded, {:?} since start", started.elapsed());
    let changes = stamp_before.as_ref().and_then(|st| Some((st, stamp::changes_since(repo.root(), &previous, st)?)));
    if let Some((st, c)) = &changes
        && c.is_empty()
    {
        // Nothing changed since the stamp: the index is up to date, and the stamp stays.
        let report = RefreshReport {
            files: previous.file_count(),
            too_large: st.too_large.clone(),
            binary: st.binary.clone(),
            dirs: st.dirs.iter().map(|(rel, _)| repo.root().join(rel)).collect(),
            nested: st.nested.clone(),
            unreadable: st.unreadable.clone(),
            compaction_due: super::compact::due(&previous),
            ..RefreshReport::default()
        };
        return (previous, report);
    }
    tracing::debug!("index stamp checked, {:?} since start", started.elapsed());
    let delta = changes.as_ref().and_then(|(st, c)| Delta::from_changes(repo, config, &previous, st, c));
    tracing::debug!("index listed what changed, {:?} since start", started.elapsed());
    // A refresh that walked the tree stamps it anew.
    let changes = if delta.is_some() { changes } else { None };
    let walk = match (delta, &changes) {
        (Some(delta), Some((st, c))) if delta::is_small(&delta) && previous.parts().0.is_some() => {
            let (index, report) = delta::refresh(repo, config, previous, st, delta);
            return finish(repo, index, report, changes.as_ref().map(|(st, c)| (*st, c)), walk_started, false, started);
        }
        (Some(delta), Some((_, c))) => delta.into_tree(repo.root(), &previous, c),
        _ => match walk::walk(repo, config, repo.root(), &WalkOptions::default()) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("symbol index walk failed: {e}");
                return (previous, RefreshReport::default());
            }
        },
    };
    let candidates = source_candidates(repo, config, walk.files);

    tracing::debug!("index walk: {} candidates in {:?}", candidates.len(), started.elapsed());
    let old: Vec<FileMeta> = previous.metas().collect();
    let old_by_path: HashMap<&str, u32> = old.iter().enumerate().map(|(i, f)| (f.rel, i as u32)).collect();
    tracing::debug!("index files mapped by path, {:?} since start", started.elapsed());

    let to_parse = candidates
        .iter()
        .filter(|(f, _)| {
            old_by_path
                .get(f.rel.as_str())
                .is_none_or(|&i| old[i as usize].size != f.size || old[i as usize].mtime_ns != f.mtime_ns)
        })
        .count();
    let show_progress = to_parse >= PROGRESS_THRESHOLD;
    if show_progress {
        eprintln!("code-intel: indexing symbols in {to_parse} files…");
    }
    let done = AtomicUsize::new(0);
    let step = (to_parse / 10).max(1);
    let process = |(file, lang): &(WalkedFile, Lang)| {
        let before = old_by_path.get(file.rel.as_str()).copied();
        if let Some(i) = before {
            let o = &old[i as usize];
            if o.size == file.size && o.mtime_ns == file.mtime_ns && o.lang == *lang {
                return Outcome::Keep(i);
            }
        }
        let outcome = index_file(file, *lang, before.map(|i| (i, &old[i as usize])), &previous);
        if show_progress {
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(step) {
                eprintln!("code-intel: indexed {n}/{to_parse} files");
            }
        }
        outcome
    };
    // Many files to parse (a build from nothing, a branch switch): a segment at a time, each
    // stored aside as soon as it is parsed, so memory holds one segment's syntax, not the
    // tree's; the segments are merged into the base at the end.
    let mut segments = Segments::new(repo.root());
    let outcomes: Vec<Outcome> = if to_parse >= SEGMENT_FILES {
        // Each run's segment is written while the next run is parsed.
        let mut all = Vec::with_capacity(candidates.len());
        let dir = segments.dir.clone();
        let dir = dir.as_path();
        let mut lost = false;
        std::thread::scope(|scope| {
            let mut writing: Option<std::thread::ScopedJoinHandle<_>> = None;
            for (n, run) in runs_of(&candidates, SEGMENT_BYTES).into_iter().enumerate() {
                let outcomes: Vec<Outcome> = run.par_iter().map(process).collect();
                if let Some(w) = writing.take() {
                    match w.join() {
                        Ok(done) => all.extend(segments.take(done)),
                        Err(_) => lost = true,
                    }
                }
                writing = Some(scope.spawn(move || write_segment(dir, n, outcomes)));
            }
            if let Some(w) = writing.take() {
                match w.join() {
                    Ok(done) => all.extend(segments.take(done)),
                    Err(_) => lost = true,
                }
            }
        });
        if lost {
            // A segment's writer died: parse everything again, in memory.
            tracing::warn!("storing a segment of the index failed; indexing in memory");
            segments.discard_all();
            all = candidates.par_iter().map(process).collect();
        }
        all
    } else {
        candidates.par_iter().map(process).collect()
    };
    tracing::debug!("index parse: {to_parse} files, {:?} since start", started.elapsed());

    let mut report =
        RefreshReport { too_large: walk.too_large, dirs: walk.dirs, nested: walk.nested, ..RefreshReport::default() };
    report.too_large.retain(|(rel, _)| Lang::detect(rel.as_ref()).is_some());
    let (base, overlay) = previous.parts();
    let mut places: Vec<Place> = Vec::with_capacity(outcomes.len());
    let mut still_there = 0;
    for (outcome, (file, _)) in outcomes.iter().zip(&candidates) {
        let place = match outcome {
            Outcome::Keep(i) | Outcome::Touch(i, _) => {
                let mtime_ns = match outcome {
                    Outcome::Touch(_, mtime_ns) => {
                        report.changed = true;
                        *mtime_ns
                    }
                    _ => old[*i as usize].mtime_ns,
                };
                let Some((part, id, record, rel)) = previous.stored(*i) else { continue };
                let record = format::Record { mtime_ns, ..record };
                let slot = match part {
                    Part::Base => BASE,
                    Part::Overlay => OVERLAY,
                };
                Place::Stored { slot, id, record, rel }
            }
            Outcome::Restore(id, mtime_ns) => {
                report.changed = true;
                let Some((record, rel)) = previous.base_record(*id) else { continue };
                Place::Stored { slot: BASE, id: *id, record: format::Record { mtime_ns: *mtime_ns, ..record }, rel }
            }
            Outcome::New(f) => {
                report.parsed += 1;
                report.changed = true;
                Place::New(f)
            }
            Outcome::Segment(segment, id) => {
                report.parsed += 1;
                report.changed = true;
                let Some((record, rel)) = segments.record(*segment, *id) else { continue };
                Place::Stored { slot: SEGMENT + *segment as usize, id: *id, record, rel }
            }
            Outcome::Binary(rel) => {
                report.binary.push(rel.clone());
                continue;
            }
            Outcome::Unreadable(rel) => {
                report.unreadable.push(rel.clone());
                continue;
            }
        };
        if old_by_path.contains_key(file.rel.as_str()) {
            still_there += 1;
        }
        places.push(place);
    }
    if let Some((st, _)) = &changes {
        // Passed over as binary before, and unchanged since (else the tree was walked).
        // (Those in a directory that became another repository left with it.)
        let nested = &report.nested;
        report.binary.extend(st.binary.iter().filter(|rel| !nested.iter().any(|n| stamp::is_under(rel, n))).cloned());
    }
    report.binary.sort();
    report.binary.dedup();
    report.files = places.len();
    drop(old_by_path);
    report.removed = old.len() - still_there;
    if report.removed > 0 {
        report.changed = true;
    }
    tracing::debug!("index places of {} files, {:?} since start", places.len(), started.elapsed());
    let one_base = match base {
        None => report.changed || whole,
        Some(_) => whole && (report.changed || overlay.is_some()),
    } || !segments.is_empty();
    let index = if one_base {
        // One base: every file kept from the base, the overlay or a segment, or parsed now.
        let slots = slots_of(base, overlay, &segments);
        let (files, ids) = plan(&places, &slots, |_| true);
        let parts = parts_of(&slots, &ids);
        let index = store::save(repo.root(), &files, &parts);
        drop(files);
        drop(parts);
        drop(places);
        drop(segments);
        drop(old);
        drop(previous);
        index
    } else if let (true, Some(b)) = (report.changed, base) {
        // An overlay on the base: the files not stored as they are in the base, what the base
        // lost, and the base files only touched.
        let mut in_base = vec![false; b.records.len()];
        let mut meta = OverlayMeta { base: super::opened_checksum(b), ..OverlayMeta::default() };
        for place in &places {
            if let Place::Stored { slot: BASE, id, record, rel } = place {
                in_base[*id as usize] = true;
                if b.records[*id as usize].mtime_ns != record.mtime_ns {
                    meta.touched.push(((*rel).to_owned(), record.mtime_ns));
                }
            }
        }
        // The base is not a part of the overlay: its files are left where they are.
        let mut slots = slots_of(base, overlay, &segments);
        slots[BASE] = None;
        let (files, ids) = plan(&places, &slots, |p| !matches!(p, Place::Stored { slot: BASE, .. }));
        // A base file neither kept nor replaced by the overlay is gone.
        meta.removed = b
            .records
            .iter()
            .zip(&in_base)
            .filter(|(_, kept)| !**kept)
            .map(|(r, _)| b.rel(r))
            .filter(|rel| files.binary_search_by(|f| f.rel().cmp(rel)).is_err())
            .map(str::to_owned)
            .collect();
        let parts = parts_of(&slots, &ids);
        // The overlay is written while the files borrow from the previous index; then the
        // base's mapping moves to the new one.
        let written = store::write_overlay(repo.root(), &files, &parts, &meta);
        drop(files);
        drop(parts);
        drop(places);
        drop(segments);
        drop(old);
        match (written, previous.into_base()) {
            (Ok(overlay), Some(base)) => SymbolIndex::with_overlay(base, overlay),
            (Err(e), _) => {
                tracing::warn!("could not write the index overlay: {e}");
                SymbolIndex::needs_rebuild()
            }
            (_, None) => SymbolIndex::needs_rebuild(),
        }
    } else {
        drop(old);
        previous
    };
    tracing::debug!("index written, {:?} since start", started.elapsed());
    finish(repo, index, report, changes.as_ref().map(|(st, c)| (*st, c)), walk_started, show_progress, started)
}

/// The end of every refresh that changed something or looked at the tree: whether the overlay
/// is due for compaction, and the walk stamp for the new index (the old one brought up to date
/// when only what changed was looked at, else a new one).
fn finish(
    repo: &Repo,
    index: SymbolIndex,
    mut report: RefreshReport,
    changes: Option<(&store::WalkStamp, &Changes)>,
    walk_started: std::time::SystemTime,
    show_progress: bool,
    started: Instant,
) -> (SymbolIndex, RefreshReport) {
    report.compaction_due = super::compact::due(&index);
    match changes.map(|(st, c)| (st, stamp::restamp(repo.root(), st, c, &report, &index, walk_started))) {
        Some((st, stamp::Restamp::Repoint(checksum))) => store::repoint_stamp(repo.root(), st, checksum),
        Some((_, stamp::Restamp::Whole(new))) => store::save_stamp(repo.root(), &new),
        None => store::save_stamp(repo.root(), &stamp::stamp(repo, &report, &index, walk_started)),
    }
    if show_progress {
        eprintln!("code-intel: symbol index ready ({} files)", report.files);
    }
    tracing::debug!("index stored and mapped, {:?} since start", started.elapsed());
    (index, report)
}

/// `previous` as the stored index has it: an overlay written for a base that another process
/// has since replaced (a compaction, `git code-intel index`) would be ignored by every reader,
/// so when the stored base is not `previous`'s, the stored index (base and overlay) is taken
/// instead. When there is no stored index to take, `previous` is stored whole.
fn with_stored_base(root: &Path, previous: SymbolIndex, whole: bool) -> (SymbolIndex, bool) {
    let Some(held) = previous.parts().0.map(super::opened_checksum) else { return (previous, whole) };
    if whole || store::stored_base_checksum(root) == Some(held) {
        return (previous, whole);
    }
    match store::load(root) {
        Some(stored) => {
            tracing::debug!("the stored index base was replaced by another process: taking it");
            (stored, whole)
        }
        None => (previous, true),
    }
}

/// Answers a lookup without the whole index: walks the tree as [`refresh`] does, keeps the
/// source files that can matter to `lookup` (ripgrep's regex engine finds the words; paths
/// select themselves), and parses only those. Every definition or occurrence of a word lies in
/// a file whose bytes contain it, so the lookup's answer is the one the full index gives.
pub fn refresh_subset(repo: &Repo, config: &Config, lookup: &Lookup) -> (SymbolIndex, RefreshReport) {
    let sources = config.source_prefixes(repo.root());
    let matcher = match lookup {
        Lookup::Words { words, ignore_case } | Lookup::Definitions { words, ignore_case } => {
            let alternation: Vec<String> = words.iter().map(|w| regex::escape(w)).collect();
            match grep_regex::RegexMatcherBuilder::new().case_insensitive(*ignore_case).build(&alternation.join("|")) {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::warn!("fast path: {e}; parsing every file");
                    None
                }
            }
        }
        _ => None,
    };
    let starts: Vec<std::path::PathBuf> = match lookup {
        Lookup::Paths(paths) => paths.iter().map(|p| repo.root().join(p)).collect(),
        _ => vec![repo.root().to_path_buf()],
    };
    let seen = AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    let binary = std::sync::Mutex::new(Vec::new());
    let mut report = RefreshReport::default();
    for start in &starts {
        let walked = walk::walk_each(repo, config, start, &WalkOptions::default(), |file| {
            if !Config::in_source_dirs(&sources, &file.rel) {
                return;
            }
            let Some(lang) = Lang::detect(file.rel.as_ref()) else { return };
            seen.fetch_add(1, Ordering::Relaxed);
            let Ok(bytes) = std::fs::read(&file.abs) else { return };
            if walk::looks_binary(&bytes) {
                binary.lock().unwrap_or_else(|p| p.into_inner()).push(file.rel);
                return;
            }
            if let Some(m) = &matcher
                && !grep_matcher::Matcher::is_match(m, &bytes).unwrap_or(true)
            {
                return;
            }
            found.lock().unwrap_or_else(|p| p.into_inner()).push((file, lang, bytes));
        });
        match walked {
            Ok(w) => report.too_large.extend(w.too_large),
            Err(e) => tracing::warn!("fast path walk failed: {e}"),
        }
    }
    // As `refresh` reports them: source languages, wherever they are.
    report.too_large.retain(|(rel, _)| Lang::detect(rel.as_ref()).is_some());
    report.too_large.sort();
    report.binary = binary.into_inner().unwrap_or_else(|p| p.into_inner());
    report.binary.sort();
    // Then parse, largest first so the two cores finish together.
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    found.sort_unstable_by_key(|(_, _, bytes)| std::cmp::Reverse(bytes.len()));
    let definitions_only = matches!(lookup, Lookup::Definitions { .. });
    let files: Vec<IndexedFile> = found
        .into_par_iter()
        .map(|(file, lang, bytes)| IndexedFile {
            size: bytes.len() as u64,
            mtime_ns: file.mtime_ns,
            hash: *blake3::hash(&bytes).as_bytes(),
            lang,
            syntax: if definitions_only {
                syntax::extract_definitions(lang, &bytes)
            } else {
                syntax::extract(lang, &bytes)
            },
            rel: file.rel,
        })
        .collect();
    report.files = files.len();
    report.parsed = files.len();
    report.fast_path = Some(FastPath {
        parsed: files.len(),
        source_files: seen.into_inner(),
        by: match lookup {
            Lookup::Words { words, .. } | Lookup::Definitions { words, .. } => words.join(", "),
            Lookup::Paths(paths) => paths.join(", "),
            Lookup::All => String::new(),
        },
    });
    (SymbolIndex::from_files(files), report)
}
