//! Bringing the symbol index up to date with the work tree.
//!
//! A file whose size and modification time are unchanged is trusted as it is. Any other file is
//! read and fingerprinted with blake3; only when the fingerprint differs is it parsed again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use super::{IndexedFile, SymbolIndex};
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
    Keep(u32),
    Touch(u32, i64),
    New(Box<IndexedFile>),
    Binary(String),
    Unreadable,
}

/// Returns the refreshed index. `previous` is consumed so unchanged files move, not copy.
pub fn refresh(repo: &Repo, config: &Config, previous: SymbolIndex) -> (SymbolIndex, RefreshReport) {
    let started = Instant::now();
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
    let old_files = previous.into_files();
    let old_by_path: HashMap<&str, u32> =
        old_files.iter().enumerate().map(|(i, f)| (f.rel.as_str(), i as u32)).collect();

    let to_parse = candidates
        .iter()
        .filter(|(f, _)| {
            old_by_path
                .get(f.rel.as_str())
                .is_none_or(|&i| old_files[i as usize].size != f.size || old_files[i as usize].mtime_ns != f.mtime_ns)
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
            let old = old_by_path.get(file.rel.as_str()).copied();
            if let Some(i) = old {
                let o = &old_files[i as usize];
                if o.size == file.size && o.mtime_ns == file.mtime_ns && o.lang == *lang {
                    return Outcome::Keep(i);
                }
            }
            let outcome = index_file(file, *lang, old.map(|i| (i, &old_files[i as usize])));
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
    let mut slots: Vec<Option<IndexedFile>> = old_files.into_iter().map(Some).collect();
    let mut kept = vec![false; slots.len()];
    let mut files = Vec::with_capacity(candidates.len());
    for outcome in outcomes {
        match outcome {
            Outcome::Keep(i) => {
                kept[i as usize] = true;
                if let Some(f) = slots[i as usize].take() {
                    files.push(f);
                }
            }
            Outcome::Touch(i, mtime_ns) => {
                kept[i as usize] = true;
                if let Some(mut f) = slots[i as usize].take() {
                    f.mtime_ns = mtime_ns;
                    report.changed = true;
                    files.push(f);
                }
            }
            Outcome::New(f) => {
                report.parsed += 1;
                report.changed = true;
                files.push(*f);
            }
            Outcome::Binary(rel) => report.binary.push(rel),
            Outcome::Unreadable => {}
        }
    }
    report.removed = kept.iter().filter(|k| !**k).count();
    if report.removed > 0 {
        report.changed = true;
    }
    report.files = files.len();
    if show_progress {
        eprintln!("code-intel: symbol index ready ({} files)", files.len());
    }
    let index = SymbolIndex::from_files(files);
    tracing::debug!("index lookups built, {:?} since start", started.elapsed());
    (index, report)
}

/// Answers a lookup without the whole index: walks the tree as [`refresh`] does, keeps the
/// source files that can matter to `lookup` (ripgrep's regex engine finds the words; paths
/// select themselves), and parses only those. Every definition or occurrence of a word lies in
/// a file whose bytes contain it, so the lookup's answer is the one the full index gives.
pub fn refresh_subset(repo: &Repo, config: &Config, lookup: &Lookup) -> (SymbolIndex, RefreshReport) {
    let sources = config.source_prefixes(repo.root());
    let matcher = match lookup {
        Lookup::Words { words, ignore_case } => {
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
            let indexed = IndexedFile {
                size: bytes.len() as u64,
                mtime_ns: file.mtime_ns,
                hash: *blake3::hash(&bytes).as_bytes(),
                lang,
                syntax: syntax::extract(lang, &bytes),
                rel: file.rel,
            };
            found.lock().unwrap_or_else(|p| p.into_inner()).push(indexed);
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
    let files = found.into_inner().unwrap_or_else(|p| p.into_inner());
    report.files = files.len();
    report.parsed = files.len();
    report.fast_path = Some(FastPath {
        parsed: files.len(),
        source_files: seen.into_inner(),
        by: match lookup {
            Lookup::Words { words, .. } => words.join(", "),
            Lookup::Paths(paths) => paths.join(", "),
            Lookup::All => String::new(),
        },
    });
    (SymbolIndex::from_files(files), report)
}

fn index_file(file: &WalkedFile, lang: Lang, old: Option<(u32, &IndexedFile)>) -> Outcome {
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
    Outcome::New(Box::new(IndexedFile {
        rel: file.rel.clone(),
        size: bytes.len() as u64,
        mtime_ns: file.mtime_ns,
        hash,
        lang,
        syntax: syntax::extract(lang, &bytes),
    }))
}
