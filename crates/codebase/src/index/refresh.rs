//! Bringing the symbol index up to date with the work tree.
//!
//! A file whose size and modification time are unchanged is trusted as it is. Any other file is
//! read and fingerprinted with blake3; only when the fingerprint differs is it parsed again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use std::ops::Not;
use std::path::Path;

use super::format::{self, Previous, Source};
use super::{FileMeta, IndexedFile, OverlayMeta, Part, SymbolIndex, store};
use crate::config::Config;
use crate::lang::Lang;
use crate::repo::Repo;
use crate::syntax;
use crate::walk::{self, WalkOptions, WalkedFile};

/// What a refresh did, and which files it could not index.
#[derive(Debug, Default, Clone)]
pub struct RefreshReport {
    pub files: usize,
    pub parsed: usize,
    pub removed: usize,
    pub changed: bool,
    pub too_large: Vec<(String, u64)>,
    pub binary: Vec<String>,
    /// The directories the walk entered: what a file watcher needs to watch.
    pub dirs: Vec<std::path::PathBuf>,
    /// Set when the answer came from [`refresh_subset`] (no index yet), not from the index.
    pub fast_path: Option<FastPath>,
    /// The overlay has grown past its threshold: fold it into the base
    /// ([`super::compact`]), in the background.
    pub compaction_due: bool,
}

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

/// How a lookup was answered before the index existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastPath {
    /// Source files that could matter, parsed for this answer.
    pub parsed: usize,
    /// Source files the walk saw.
    pub source_files: usize,
    /// What the candidates were chosen by (the words, or the paths).
    pub by: String,
}

/// Below this many files to parse, no progress is printed.
const PROGRESS_THRESHOLD: usize = 500;

enum Outcome {
    /// Unchanged: the live file with this id.
    Keep(u32),
    /// The live file with this id, its content unchanged and its time moved.
    Touch(u32, i64),
    /// The base's file with this id: the content is the base's again (an edit undone, a branch
    /// switched back), at this time.
    Restore(u32, i64),
    New(Box<IndexedFile>),
    Binary(String),
    Unreadable,
}

/// Where a file of the refreshed index comes from: the base's or the overlay's file `id`, whose
/// record (with its time brought up to date) is copied, or a file parsed now.
enum Place<'a> {
    Base { id: u32, record: format::Record, rel: &'a str },
    Overlay { id: u32, record: format::Record, rel: &'a str },
    New(&'a IndexedFile),
}

/// Brings `previous` up to date with the work tree, re-parsing only files whose content
/// changed. What changed goes into the overlay (only the changed files are written; the base
/// is untouched), and a lookup merges the two. With `whole`, the result is stored as one base
/// instead (compacting any overlay): what `git code-intel index` and a build from nothing do.
/// When nothing changed (and not `whole`), `previous` comes back as it was. Either way the walk
/// stamp is stored, so a one-shot command can later tell the index is fresh without walking
/// ([`is_fresh`]).
pub fn refresh(repo: &Repo, config: &Config, previous: SymbolIndex, whole: bool) -> (SymbolIndex, RefreshReport) {
    let started = Instant::now();
    // Made before the walk: creating `.code-intel/` changes the root directory's time, which
    // would make this walk's stamp distrust the root.
    if let Err(e) = crate::derived::ensure_ignored_dir(&store::index_dir(repo.root())) {
        tracing::debug!("index directory: {e}");
    }
    let walk_started = std::time::SystemTime::now();
    let walk = match walk::walk(repo, config, repo.root(), &WalkOptions::default()) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("symbol index walk failed: {e}");
            return (previous, RefreshReport::default());
        }
    };
    let sources = config.source_prefixes(repo.root());
    let candidates: Vec<(WalkedFile, Lang)> = walk
        .files
        .into_iter()
        .filter(|f| Config::in_source_dirs(&sources, &f.rel))
        .filter_map(|f| Lang::detect(f.rel.as_ref()).map(|l| (f, l)))
        .collect();

    tracing::debug!("index walk: {} candidates in {:?}", candidates.len(), started.elapsed());
    let old: Vec<FileMeta> = previous.metas().collect();
    let old_by_path: HashMap<&str, u32> = old.iter().enumerate().map(|(i, f)| (f.rel, i as u32)).collect();

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
    let outcomes: Vec<Outcome> = candidates
        .par_iter()
        .map(|(file, lang)| {
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
        })
        .collect();
    tracing::debug!("index parse: {to_parse} files, {:?} since start", started.elapsed());

    let mut report = RefreshReport { files: 0, too_large: walk.too_large, dirs: walk.dirs, ..RefreshReport::default() };
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
                match part {
                    Part::Base => Place::Base { id, record, rel },
                    Part::Overlay => Place::Overlay { id, record, rel },
                }
            }
            Outcome::Restore(id, mtime_ns) => {
                report.changed = true;
                let Some((record, rel)) = previous.base_record(*id) else { continue };
                Place::Base { id: *id, record: format::Record { mtime_ns: *mtime_ns, ..record }, rel }
            }
            Outcome::New(f) => {
                report.parsed += 1;
                report.changed = true;
                Place::New(f)
            }
            Outcome::Binary(rel) => {
                report.binary.push(rel.clone());
                continue;
            }
            Outcome::Unreadable => continue,
        };
        if old_by_path.contains_key(file.rel.as_str()) {
            still_there += 1;
        }
        places.push(place);
    }
    report.files = places.len();
    drop(old_by_path);
    report.removed = old.len() - still_there;
    if report.removed > 0 {
        report.changed = true;
    }
    let overlay_len = overlay.map_or(0, |o| o.opened.records.len());
    let one_base = match base {
        None => report.changed || whole,
        Some(_) => whole && (report.changed || overlay.is_some()),
    };
    let index = if one_base {
        // One base: every file kept from the base or the overlay, or parsed now.
        let mut base_ids = vec![None; base.map_or(0, |b| b.records.len())];
        let mut overlay_ids = vec![None; overlay_len];
        let files: Vec<Source> = places
            .iter()
            .enumerate()
            .map(|(new_id, place)| match place {
                Place::Base { id, record, rel } => {
                    base_ids[*id as usize] = Some(new_id as u32);
                    Source::Kept { record: *record, rel, from: 0 }
                }
                Place::Overlay { id, record, rel } => {
                    overlay_ids[*id as usize] = Some(new_id as u32);
                    Source::Kept { record: *record, rel, from: 1 }
                }
                Place::New(f) => f.as_source(),
            })
            .collect();
        let mut parts = Vec::new();
        if let Some(b) = base {
            parts.push(Previous { opened: b, new_ids: &base_ids });
            if let Some(o) = overlay {
                parts.push(Previous { opened: &o.opened, new_ids: &overlay_ids });
            }
        }
        let index = store::save(repo.root(), &files, &parts);
        drop(files);
        drop(old);
        drop(previous);
        index
    } else if let (true, Some(b)) = (report.changed, base) {
        // An overlay on the base: the files not stored as they are in the base, what the base
        // lost, and the base files only touched.
        let mut overlay_ids = vec![None; overlay_len];
        let mut in_base = vec![false; b.records.len()];
        let mut meta = OverlayMeta { base: super::opened_checksum(b), ..OverlayMeta::default() };
        let mut files: Vec<Source> = Vec::new();
        for place in &places {
            match place {
                Place::Base { id, record, rel } => {
                    in_base[*id as usize] = true;
                    if b.records[*id as usize].mtime_ns != record.mtime_ns {
                        meta.touched.push(((*rel).to_owned(), record.mtime_ns));
                    }
                }
                Place::Overlay { id, record, rel } => {
                    overlay_ids[*id as usize] = Some(files.len() as u32);
                    files.push(Source::Kept { record: *record, rel, from: 0 });
                }
                Place::New(f) => files.push(f.as_source()),
            }
        }
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
        let mut parts = Vec::new();
        if let Some(o) = overlay {
            parts.push(Previous { opened: &o.opened, new_ids: &overlay_ids });
        }
        // The overlay is written while the files borrow from the previous index; then the
        // base's mapping moves to the new one.
        let written = store::write_overlay(repo.root(), &files, &parts, &meta);
        drop(files);
        drop(places);
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
    report.compaction_due = super::compact::due(&index);
    store::save_stamp(repo.root(), &stamp(repo.root(), &report, &index, walk_started));
    if show_progress {
        eprintln!("code-intel: symbol index ready ({} files)", report.files);
    }
    tracing::debug!("index stored and mapped, {:?} since start", started.elapsed());
    (index, report)
}

/// How long before the walk started a directory must have last changed to be trusted by the
/// stamp: file systems stamp times from a coarse clock, so a change made during the walk can
/// carry a time slightly before it.
const STAMP_SLACK: std::time::Duration = std::time::Duration::from_secs(1);

/// The walk stamp: each directory walked and the ignore files that rule it, with their times.
/// A directory changed within [`STAMP_SLACK`] of the walk is recorded as untrusted, so the next
/// check walks again.
fn stamp(
    root: &Path,
    report: &RefreshReport,
    index: &SymbolIndex,
    walk_started: std::time::SystemTime,
) -> store::WalkStamp {
    let dirs = &report.dirs;
    let trusted_before = walk_started.checked_sub(STAMP_SLACK).map_or(i64::MIN, nanos);
    let mut paths: Vec<(String, i64)> = Vec::with_capacity(dirs.len() * 3 + 2);
    for dir in dirs {
        let Ok(rel) = dir.strip_prefix(root) else { continue };
        let rel = crate::repo::to_slash(rel);
        let mtime = mtime_of(dir);
        paths.push((rel.clone(), if mtime >= trusted_before { i64::MIN } else { mtime }));
        for name in [".gitignore", ".ignore"] {
            let file = if rel.is_empty() { name.to_owned() } else { format!("{rel}/{name}") };
            let mtime = mtime_of(&root.join(&file));
            paths.push((file, mtime));
        }
    }
    let passed_over = report.binary.iter().chain(report.too_large.iter().map(|(rel, _)| rel));
    for file in [".git/info/exclude", crate::config::CONFIG_PATH].into_iter().chain(passed_over.map(String::as_str)) {
        paths.push((file.to_owned(), mtime_of(&root.join(file))));
    }
    paths.sort();
    store::WalkStamp {
        index_checksum: index.checksum(),
        paths,
        too_large: report.too_large.clone(),
        binary: report.binary.clone(),
    }
}

fn nanos(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// The modification time of `path` in nanoseconds, -1 when it does not exist.
fn mtime_of(path: &Path) -> i64 {
    std::fs::metadata(path).map_or(-1, |m| walk::mtime_ns(&m))
}

/// True when nothing the index depends on changed since its stamp: every directory walked and
/// every ignore file has the time it had, and every indexed file its size and time. One `stat`
/// each, in parallel; no directory is listed. (A global git excludes file is not watched: after
/// changing it, run `git code-intel index`.)
pub fn is_fresh(root: &Path, index: &SymbolIndex, stamp: &store::WalkStamp) -> bool {
    if stamp.index_checksum != index.checksum() || index.file_count() == 0 {
        return false;
    }
    let changed =
        stamp.paths.par_iter().find_any(|(rel, mtime)| *mtime == i64::MIN || mtime_of(&root.join(rel)) != *mtime);
    if let Some((rel, _)) = changed {
        tracing::debug!("index stamp: '{rel}' changed since the last walk");
        return false;
    }
    let metas: Vec<FileMeta> = index.metas().collect();
    let changed = metas.par_iter().find_any(|f| {
        std::fs::metadata(root.join(f.rel)).is_ok_and(|m| m.len() == f.size && walk::mtime_ns(&m) == f.mtime_ns).not()
    });
    if let Some(f) = changed {
        tracing::debug!("index stamp: '{}' changed since the last walk", f.rel);
        return false;
    }
    true
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

fn index_file(file: &WalkedFile, lang: Lang, old: Option<(u32, &FileMeta)>, previous: &SymbolIndex) -> Outcome {
    let Ok(bytes) = std::fs::read(&file.abs) else { return Outcome::Unreadable };
    if walk::looks_binary(&bytes) {
        return Outcome::Binary(file.rel.clone());
    }
    let hash = *blake3::hash(&bytes).as_bytes();
    if let Some((i, o)) = old
        && o.hash == hash
        && o.lang == lang
    {
        return Outcome::Touch(i, file.mtime_ns);
    }
    // The base's own version (behind the overlay's, or removed): nothing to parse.
    if let Some((id, base)) = previous.base_meta(&file.rel)
        && base.hash == hash
        && base.lang == lang
        && base.size == bytes.len() as u64
    {
        return Outcome::Restore(id, file.mtime_ns);
    }
    Outcome::New(Box::new(IndexedFile {
        rel: file.rel.clone(),
        size: bytes.len() as u64,
        mtime_ns: file.mtime_ns,
        hash,
        lang,
        syntax: syntax::extract(lang, &bytes),
    }))
}
